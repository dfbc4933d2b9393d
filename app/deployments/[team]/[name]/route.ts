// {PUBLIC_URL}/deployments/{team-slug}/{name}: completion (POST), streamed completion
// (POST with stream: true, data-only SSE ended by [DONE]) and the update/end event stream (GET).
import { DeploymentCompletionBody } from "@/lib/contracts/deployments";
import { preflightResponse } from "@/lib/http/cors";
import { completionStreamFrames, updateStreamFrames } from "@/lib/http/deployment-frames";
import { parseStreamQuery } from "@/lib/http/deployment-query";
import { deploymentRoute } from "@/lib/http/deployment-route";
import { jsonResponse } from "@/lib/http/respond";
import { sseResponse } from "@/lib/http/sse";
import { deploymentCapture, requestedCapture } from "@/lib/services/capture";
import {
  generateOnDeployment,
  openStreamOnDeployment,
  toCompletionResult,
} from "@/lib/services/deployment-completions";

export const dynamic = "force-dynamic";

export const POST = deploymentRoute(
  { body: DeploymentCompletionBody },
  async ({ req, body, requestId, handle, team, deployment, signal, abort, meter }) => {
    const { stream, pipeline, ...params } = body;
    // Checked before anything is generated: an unknown or foreign pipeline is a 404.
    const capture = await deploymentCapture(handle.db, {
      requested: requestedCapture(pipeline, req.headers),
      team,
      deployment,
      prompt: params.prompt,
      echo: params.echo,
      requestId,
    });
    if (stream) {
      const events = await openStreamOnDeployment(handle.db, deployment, params, { signal, requestId, meter, capture });
      return sseResponse(completionStreamFrames(events, requestId), { onCancel: abort });
    }
    const result = await generateOnDeployment(handle.db, deployment, params, { signal, requestId, meter, capture });
    return jsonResponse(toCompletionResult(result, params.logprobs !== undefined));
  },
);

export const GET = deploymentRoute(
  {},
  async ({ req, url, requestId, handle, team, deployment, signal, abort, meter }) => {
    const params = parseStreamQuery(url.searchParams);
    const capture = await deploymentCapture(handle.db, {
      requested: requestedCapture(undefined, req.headers),
      team,
      deployment,
      prompt: params.prompt,
      requestId,
    });
    const events = await openStreamOnDeployment(handle.db, deployment, params, { signal, requestId, meter, capture });
    return sseResponse(updateStreamFrames(events, requestId), { onCancel: abort });
  },
);

export function OPTIONS(): Response {
  return preflightResponse();
}
