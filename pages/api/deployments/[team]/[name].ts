// {PUBLIC_URL}/deployments/{team-slug}/{name} (rewritten here by next.config.mjs): completion
// (POST), streamed completion (POST with stream: true, data-only SSE ended by [DONE]) and the
// update/end event stream (GET). A Pages Router API route for the reason given in
// lib/http/node-deployment-route.ts.
import { DeploymentCompletionBody } from "@/lib/contracts/deployments";
import { completionStreamFrames, updateStreamFrames } from "@/lib/http/deployment-frames";
import { parseStreamQuery } from "@/lib/http/deployment-query";
import { nodeDeploymentMethods, nodeDeploymentRoute } from "@/lib/http/node-deployment-route";
import { deploymentCapture, requestedCapture } from "@/lib/services/capture";
import {
  generateOnDeployment,
  openStreamOnDeployment,
  toCompletionResult,
} from "@/lib/services/deployment-completions";

// Next's body parser is off: the route reads the body itself, with the API's limit and errors.
// No response limit: a stream of server-sent events may well pass Next's 4 MB warning.
export const config = { api: { bodyParser: false, responseLimit: false } };

const POST = nodeDeploymentRoute(
  { method: "POST", body: DeploymentCompletionBody },
  async ({ req, body, requestId, handle, team, deployment, key, signal, meter }) => {
    const { stream, pipeline, ...params } = body;
    // Checked before anything is generated: an unknown or foreign pipeline is a 404, one outside
    // the model key's capture scope a 403.
    const capture = await deploymentCapture(handle.db, {
      requested: requestedCapture(pipeline, req.headers),
      team,
      deployment,
      prompt: params.prompt,
      echo: params.echo,
      requestId,
      key,
    });
    if (stream) {
      const events = await openStreamOnDeployment(handle.db, deployment, params, { signal, requestId, meter, capture });
      return { events: completionStreamFrames(events, requestId) };
    }
    const result = await generateOnDeployment(handle.db, deployment, params, { signal, requestId, meter, capture });
    return { json: toCompletionResult(result, params.logprobs !== undefined) };
  },
);

const GET = nodeDeploymentRoute(
  { method: "GET" },
  async ({ req, query, requestId, handle, team, deployment, key, signal, meter }) => {
    const params = parseStreamQuery(query);
    const capture = await deploymentCapture(handle.db, {
      requested: requestedCapture(undefined, req.headers),
      team,
      deployment,
      prompt: params.prompt,
      requestId,
      key,
    });
    const events = await openStreamOnDeployment(handle.db, deployment, params, { signal, requestId, meter, capture });
    return { events: updateStreamFrames(events, requestId) };
  },
);

export default nodeDeploymentMethods({ POST, GET });
