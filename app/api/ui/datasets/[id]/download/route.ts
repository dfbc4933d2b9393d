import { blobStore } from "@/lib/blob";
import { env } from "@/lib/env";
import { sessionRoute } from "@/lib/http/session-route";
import { datasetDownload } from "@/lib/services/datasets";

export const dynamic = "force-dynamic";

// A fresh signed URL per click (the list never carries one that could expire on screen).
export const GET = sessionRoute({}, async ({ handle, session, params }) => {
  const { url, expiresAt } = await datasetDownload(handle.db, blobStore(), {
    teamId: session.team.id,
    id: params.id!,
    ttlSeconds: env().SIGNED_URL_TTL_SECONDS,
  });
  return { url, expiresAt: expiresAt.toISOString() };
});
