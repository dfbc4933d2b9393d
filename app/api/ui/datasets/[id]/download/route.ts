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
  return { url: onThisOrigin(url), expiresAt: expiresAt.toISOString() };
});

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");

/**
 * A URL of the app's own blob route (PUBLIC_URL's origin) as a path: the browser fetches it from
 * the host the dashboard was opened on (only the path and query are signed), not from PUBLIC_URL's
 * host (`localhost` by default, refused on a teammate's machine). An object store's URL stays as is.
 */
function onThisOrigin(url: string): string {
  const u = new URL(url);
  return u.origin === new URL(env().PUBLIC_URL).origin ? u.pathname + u.search : url;
}
