// Hosted chat and prompt completion on one of the caller's deployments (Bearer API key).
import { ChatCompletionBody } from "@/lib/contracts/chat-completions";
import { chatStreamFrames } from "@/lib/http/chat-frames";
import { apiRoute } from "@/lib/http/api-route";
import { teamLimits } from "@/lib/limits";
import { sseResponse } from "@/lib/http/sse";
import { requestedCapture, resolveCapture } from "@/lib/services/capture";
import {
  chatCompletionMeta,
  chatTopLogprobs,
  resolveChatModel,
  toChatCompletion,
  toCompletionParams,
} from "@/lib/services/chat-completions";
import { generateOnDeployment, openStreamOnDeployment } from "@/lib/services/deployment-completions";
import { collectOnDeployment } from "@/lib/services/openai-completions";

export const dynamic = "force-dynamic";

export const POST = apiRoute({ body: ChatCompletionBody }, async ({ req, requestId, handle, principal, body }) => {
  const requested = requestedCapture(body.pipeline, req.headers);
  // The deployment and the capture's pipeline are looked up together; both before generating.
  const [model, target] = await Promise.allSettled([
    resolveChatModel(handle.db, principal.team, body.model),
    requested ? resolveCapture(handle.db, principal.team.id, requested) : undefined,
  ]);
  if (model.status === "rejected") throw model.reason;
  if (target.status === "rejected") throw target.reason;
  const { deployment, name } = model.value;
  const params = toCompletionParams(body);
  const meta = chatCompletionMeta(name);
  const logprobs = chatTopLogprobs(body);
  const meter = {
    quota: { keyId: principal.key.id, limits: teamLimits(principal.team) },
    teamSlug: principal.team.slug,
  };
  const capture = target.value && {
    ...target.value,
    messages: body.messages ?? [{ role: "user" as const, content: body.prompt! }],
    facts: {
      endpoint: "chat.completions" as const,
      deployment: name,
      deploymentId: deployment.id,
      model: deployment.model,
      requestId,
    },
  };
  // Aborted when the client disconnects, or when the response stream is cancelled.
  const controller = new AbortController();
  req.signal.addEventListener("abort", () => controller.abort(), { once: true });
  const call = { signal: controller.signal, requestId, meter, capture };
  if (body.stream) {
    const events = await openStreamOnDeployment(handle.db, deployment, params, call);
    const options = { logprobs, includeUsage: body.stream_options?.include_usage ?? false };
    return sseResponse(chatStreamFrames(events, meta, requestId, options), { onCancel: () => controller.abort() });
  }
  // Logprobs come with the text each token added, which only the generation's events carry.
  return toChatCompletion(
    logprobs === undefined
      ? await generateOnDeployment(handle.db, deployment, params, call)
      : await collectOnDeployment(handle.db, deployment, params, call),
    meta,
    logprobs,
  );
});
