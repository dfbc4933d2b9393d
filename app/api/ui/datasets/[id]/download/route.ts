import { blobStore } from "@/lib/blob";
import { env } from "@/lib/env";
import { sessionRoute } from "@/lib/http/session-route";
import { DownloadQuery } from "@/lib/contracts/datasets";
import { validated } from "@/lib/http/route-parts";
import { datasetDownload } from "@/lib/services/datasets";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// A fresh signed URL per click (the list never carries one that could expire on screen).
export const GET = sessionRoute({}, async ({ req, handle, session, params }) => {
  const { split } = validated(DownloadQuery, Object.fromEntries(new URL(req.url).searchParams));
  const { url, expiresAt } = await datasetDownload(handle.db, blobStore(), {
    teamId: session.team.id,
    id: params.id!,
    ttlSeconds: env().SIGNED_URL_TTL_SECONDS,
    split,
  });
  return { url, expiresAt: expiresAt.toISOString() };
});

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
