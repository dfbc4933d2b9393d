import { fromZodError } from "@/lib/errors";
import { completionStreamFrames } from "@/lib/http/deployment-frames";
import { sessionRoute } from "@/lib/http/session-route";
import { sseResponse } from "@/lib/http/sse";
import { openStreamOnDeployment } from "@/lib/services/deployment-completions";
import { getDeploymentByName } from "@/lib/services/deployments";
import { parsePlaygroundSearch } from "@/lib/ui/playground-query";

export const dynamic = "force-dynamic";

/**
 * The playground's event stream: the signed-in member's team's deployment, without a model key
 * in the browser. Frames are those of the deployment endpoint's streamed POST (deltas with their
 * logprobs when asked, the finish, usage, then [DONE]).
 */
export const GET = sessionRoute({}, async ({ req, requestId, handle, session, params }) => {
  const parsed = parsePlaygroundSearch(new URL(req.url).searchParams);
  if (!parsed.success) throw fromZodError(parsed.error);
  const deployment = await getDeploymentByName(handle.db, { teamId: session.team.id, name: params.name! });
  const upstream = new AbortController();
  req.signal.addEventListener("abort", () => upstream.abort(), { once: true });
  const events = await openStreamOnDeployment(handle.db, deployment, parsed.data, {
    signal: upstream.signal,
    requestId,
    meter: { teamSlug: session.team.slug },
  });
  return sseResponse(completionStreamFrames(events, requestId), { onCancel: () => upstream.abort() });
});
