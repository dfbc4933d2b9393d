// Hosted chat and prompt completion on one of the caller's deployments (Bearer API key).
import { ChatCompletionBody } from "@/lib/contracts/chat-completions";
import { chatStreamFrames } from "@/lib/http/chat-frames";
import { apiRoute } from "@/lib/http/api-route";
import { teamLimits } from "@/lib/limits";
import { sseResponse } from "@/lib/http/sse";
import {
  chatCompletionMeta,
  resolveChatModel,
  toChatCompletion,
  toCompletionParams,
} from "@/lib/services/chat-completions";
import { generateOnDeployment, openStreamOnDeployment } from "@/lib/services/deployment-completions";

export const dynamic = "force-dynamic";

export const POST = apiRoute({ body: ChatCompletionBody }, async ({ req, requestId, handle, principal, body }) => {
  const { deployment, name } = await resolveChatModel(handle.db, principal.team, body.model);
  const params = toCompletionParams(body);
  const meta = chatCompletionMeta(name);
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
    return sseResponse(chatStreamFrames(events, meta, requestId), { onCancel: () => controller.abort() });
  }
  return toChatCompletion(
    await generateOnDeployment(handle.db, deployment, params, { signal: controller.signal, requestId, meter }),
    meta,
  );
});
