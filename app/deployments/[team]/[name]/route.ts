// {PUBLIC_URL}/deployments/{team-slug}/{name}: completion (POST), streamed completion
// (POST with stream: true, data-only SSE ended by [DONE]) and the update/end event stream (GET).
import { DeploymentCompletionBody } from "@/lib/contracts/deployments";
import { preflightResponse } from "@/lib/http/cors";
import { completionStreamFrames, updateStreamFrames } from "@/lib/http/deployment-frames";
import { parseStreamQuery } from "@/lib/http/deployment-query";
import { deploymentRoute } from "@/lib/http/deployment-route";
import { jsonResponse } from "@/lib/http/respond";
import { sseResponse } from "@/lib/http/sse";
import {
  generateOnDeployment,
  openStreamOnDeployment,
  toCompletionResult,
} from "@/lib/services/deployment-completions";

export const dynamic = "force-dynamic";

export const POST = deploymentRoute(
  { body: DeploymentCompletionBody },
  async ({ body, requestId, handle, deployment, signal, abort, meter }) => {
    const { stream, ...params } = body;
    if (stream) {
      const events = await openStreamOnDeployment(handle.db, deployment, params, { signal, requestId, meter });
      return sseResponse(completionStreamFrames(events, requestId), { onCancel: abort });
    }
    const result = await generateOnDeployment(handle.db, deployment, params, { signal, requestId, meter });
    return jsonResponse(toCompletionResult(result, params.logprobs !== undefined));
  },
);

export const GET = deploymentRoute({}, async ({ url, requestId, handle, deployment, signal, abort, meter }) => {
  const params = parseStreamQuery(url.searchParams);
  const events = await openStreamOnDeployment(handle.db, deployment, params, { signal, requestId, meter });
  return sseResponse(updateStreamFrames(events, requestId), { onCancel: abort });
});

export function OPTIONS(): Response {
  return preflightResponse();
}
