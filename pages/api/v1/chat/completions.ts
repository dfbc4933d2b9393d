// POST /v1/chat/completions (rewritten here by next.config.mjs): hosted chat and prompt
// completion on one of the caller's deployments (Bearer API key). A Pages Router API route, like
// the deployment endpoints, for the reason given in lib/http/node-api-route.ts: it is what
// OpenAI's clients call for every chat turn.
import { ChatCompletionBody } from "@/lib/contracts/chat-completions";
import { chatStreamFrames } from "@/lib/http/chat-frames";
import { nodeApiRoute, streamed } from "@/lib/http/node-api-route";
import { requestedCapture, resolveCapture } from "@/lib/services/capture";
import { keyMeter } from "@/lib/services/completion-events";
import {
  chatCompletionMeta,
  chatTopLogprobs,
  resolveChatModel,
  toChatCompletion,
  toCompletionParams,
} from "@/lib/services/chat-completions";
import { generateOnDeployment, openStreamOnDeployment } from "@/lib/services/deployment-completions";
import { collectOnDeployment } from "@/lib/services/openai-completions";

// Next's body parser is off: nodeApiRoute reads the body itself, with the API's limit and errors.
// No response limit: a stream of server-sent events may well pass Next's 4 MB warning.
export const config = { api: { bodyParser: false, responseLimit: false } };

export default nodeApiRoute(
  { method: "POST", body: ChatCompletionBody },
  async ({ req, requestId, handle, principal, body, signal }) => {
    const requested = requestedCapture(body.pipeline, req.headers);
    // The deployment and the capture's pipeline are looked up together; both before generating.
    const [model, target] = await Promise.allSettled([
      resolveChatModel(handle.db, principal.team, body.model),
      requested ? resolveCapture(handle.db, principal.team.id, requested, principal.key) : undefined,
    ]);
    if (model.status === "rejected") throw model.reason;
    if (target.status === "rejected") throw target.reason;
    const { deployment, name } = model.value;
    const params = toCompletionParams(body);
    const meta = chatCompletionMeta(name);
    const logprobs = chatTopLogprobs(body);
    const capture = target.value && {
      ...target.value,
      messages: body.messages ?? [{ role: "user" as const, content: body.prompt! }],
      facts: {
        endpoint: "chat.completions" as const,
        deployment: name,
        deploymentId: deployment.id,
        model: deployment.model,
        requestId,
        keyId: principal.key.id,
      },
    };
    // `signal`: aborted when the client disconnects, which stops the generation.
    const call = { signal, requestId, meter: keyMeter(principal), capture };
    if (body.stream) {
      const events = await openStreamOnDeployment(handle.db, deployment, params, call);
      const options = { logprobs, includeUsage: body.stream_options?.include_usage ?? false };
      return streamed(chatStreamFrames(events, meta, requestId, options));
    }
    // Logprobs come with the text each token added, which only the generation's events carry.
    return toChatCompletion(
      logprobs === undefined
        ? await generateOnDeployment(handle.db, deployment, params, call)
        : await collectOnDeployment(handle.db, deployment, params, call),
      meta,
      logprobs,
    );
  },
);
