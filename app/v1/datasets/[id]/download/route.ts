import { blobStore } from "@/lib/blob";
import { env } from "@/lib/env";
import { apiRoute } from "@/lib/http/api-route";
import { DownloadQuery } from "@/lib/contracts/datasets";
import { validated } from "@/lib/http/route-parts";
import { datasetDownload } from "@/lib/services/datasets";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// A signed, expiring URL of the JSONL file (the app's own for the local driver, S3's otherwise).
export const GET = apiRoute({}, async ({ req, handle, principal, params }) => {
  const { split } = validated(DownloadQuery, Object.fromEntries(new URL(req.url).searchParams));
  const { url, expiresAt } = await datasetDownload(handle.db, blobStore(), {
    teamId: principal.team.id,
    id: params.id!,
    ttlSeconds: env().SIGNED_URL_TTL_SECONDS,
    split,
  });
  return { url, expiresAt: expiresAt.toISOString() };
});

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
