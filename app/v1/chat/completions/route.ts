// Hosted chat and prompt completion on one of the caller's deployments (Bearer API key).
import { ChatCompletionBody } from "@/lib/contracts/chat-completions";
import { chatStreamFrames } from "@/lib/http/chat-frames";
import { apiRoute } from "@/lib/http/api-route";
import { teamLimits } from "@/lib/limits";
import { sseResponse } from "@/lib/http/sse";
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
  const { deployment, name } = await resolveChatModel(handle.db, principal.team, body.model);
  const params = toCompletionParams(body);
  const meta = chatCompletionMeta(name);
  const logprobs = chatTopLogprobs(body);
  const meter = {
    quota: { keyId: principal.key.id, limits: teamLimits(principal.team) },
    teamSlug: principal.team.slug,
  };
  // Aborted when the client disconnects, or when the response stream is cancelled.
  const controller = new AbortController();
  req.signal.addEventListener("abort", () => controller.abort(), { once: true });
  if (body.stream) {
    const events = await openStreamOnDeployment(handle.db, deployment, params, {
      signal: controller.signal,
      requestId,
      meter,
    });
    const options = { logprobs, includeUsage: body.stream_options?.include_usage ?? false };
    return sseResponse(chatStreamFrames(events, meta, requestId, options), { onCancel: () => controller.abort() });
  }
  const call = { signal: controller.signal, requestId, meter };
  // Logprobs come with the text each token added, which only the generation's events carry.
  return toChatCompletion(
    logprobs === undefined
      ? await generateOnDeployment(handle.db, deployment, params, call)
      : await collectOnDeployment(handle.db, deployment, params, call),
    meta,
    logprobs,
  );
});
