// POST /v1/completions (rewritten here by next.config.mjs): OpenAI's text completions on one of
// the caller's deployments (Bearer API key): the deployment completion path with OpenAI's request
// and response shapes (docs/api.md "OpenAI-compatible API"). A Pages Router API route for the
// reason given in lib/http/node-api-route.ts.
import { CompletionsBody } from "@/lib/contracts/openai";
import { nodeApiRoute, streamed } from "@/lib/http/node-api-route";
import { textCompletionStreamFrames } from "@/lib/http/openai-frames";
import { deploymentCapture, requestedCapture } from "@/lib/services/capture";
import { keyMeter } from "@/lib/services/completion-events";
import { resolveChatModel } from "@/lib/services/chat-completions";
import { openStreamOnDeployment } from "@/lib/services/deployment-completions";
import {
  collectOnDeployment,
  promptText,
  textCompletionMeta,
  toTextCompletion,
  toTextCompletionParams,
} from "@/lib/services/openai-completions";

// Next's body parser is off: nodeApiRoute reads the body itself, with the API's limit and errors.
// No response limit: a stream of server-sent events may well pass Next's 4 MB warning.
export const config = { api: { bodyParser: false, responseLimit: false } };

export default nodeApiRoute(
  { method: "POST", body: CompletionsBody },
  async ({ req, requestId, handle, principal, body, signal }) => {
    const requested = requestedCapture(body.pipeline, req.headers);
    const { deployment, name } = await resolveChatModel(handle.db, principal.team, body.model);
    const params = toTextCompletionParams(body);
    // Checked before anything is generated: an unknown or foreign pipeline is a 404.
    const capture = await deploymentCapture(handle.db, {
      requested,
      team: principal.team,
      deployment,
      prompt: promptText(body.prompt),
      echo: params.echo,
      requestId,
      endpoint: "completions",
      key: principal.key,
    });
    const meta = textCompletionMeta(name);
    // `signal`: aborted when the client disconnects, which stops the generation.
    const call = { signal, requestId, meter: keyMeter(principal), capture };
    if (body.stream) {
      const events = await openStreamOnDeployment(handle.db, deployment, params, call);
      const options = { logprobs: body.logprobs, includeUsage: body.stream_options?.include_usage ?? false };
      return streamed(textCompletionStreamFrames(events, meta, requestId, options));
    }
    return toTextCompletion(await collectOnDeployment(handle.db, deployment, params, call), meta, body.logprobs);
  },
);
