import { memberLimitId, teamLimits } from "@/lib/limits";
import { completionStreamFrames } from "@/lib/http/deployment-frames";
import { sessionRoute } from "@/lib/http/session-route";
import { sseResponse } from "@/lib/http/sse";
import { deploymentCapture } from "@/lib/services/capture";
import { openStreamOnDeployment } from "@/lib/services/deployment-completions";
import { getDeploymentByName } from "@/lib/services/deployments";
import { PlaygroundBody } from "@/lib/ui/playground-query";
import { otherMethods } from "@/lib/http/other-methods";
import { abortOnRemoval } from "@/lib/services/key-watch";

export const dynamic = "force-dynamic";

/**
 * The playground's event stream: the signed-in member's team's deployment, without a model key
 * in the browser. Frames are those of the deployment endpoint's streamed POST (deltas with their
 * logprobs when asked, the finish, usage, then [DONE]). `pipeline`: saved there once finished.
 * A POST with a JSON body (lib/ui/playground-query.ts), read with fetch as a stream.
 */
export const POST = sessionRoute(
  { body: PlaygroundBody },
  async ({ req, requestId, startedAt, handle, session, params, body }) => {
    const deployment = await getDeploymentByName(handle.db, { teamId: session.team.id, name: params.name! });
    // "Save to pipeline": the finished completion is captured like the deployment endpoint's.
    const { pipeline, ...rest } = body;
    const capture = await deploymentCapture(handle.db, {
      requested: pipeline ? { capture: pipeline, param: "pipeline" } : undefined,
      team: session.team,
      deployment,
      prompt: rest.prompt,
      requestId,
    });
    const upstream = new AbortController();
    req.signal.addEventListener("abort", () => upstream.abort(), { once: true });
    // A member taken out of the team meanwhile: the stream ends with the 403 as its error event.
    const { signal, unwatch } = abortOnRemoval(
      handle.sql,
      { userId: session.user.id, teamId: session.team.id },
      startedAt,
      upstream.signal,
    );
    signal.addEventListener("abort", unwatch, { once: true });
    let events: Awaited<ReturnType<typeof openStreamOnDeployment>>;
    try {
      events = await openStreamOnDeployment(handle.db, deployment, rest, {
        signal,
        requestId,
        // The member's own generation limits (concurrent streams, tokens per minute), as a key's.
        meter: {
          teamSlug: session.team.slug,
          quota: { keyId: memberLimitId(session.user.id, session.team.id), limits: teamLimits(session.team) },
        },
        capture,
      });
    } catch (err) {
      unwatch();
      throw err;
    }
    return sseResponse(watched(completionStreamFrames(events, requestId), unwatch), {
      onCancel: () => upstream.abort(),
    });
  },
);

export const { GET, PUT, PATCH, DELETE } = otherMethods("POST");

/** `frames`, then `unwatch` once they end (whichever way). */
async function* watched(frames: AsyncIterable<string>, unwatch: () => void): AsyncIterable<string> {
  try {
    yield* frames;
  } finally {
    unwatch();
  }
}
