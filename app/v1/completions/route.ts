// OpenAI's text completions on one of the caller's deployments (Bearer API key): the deployment
// completion path with OpenAI's request and response shapes (docs/api.md "OpenAI-compatible API").
import { CompletionsBody } from "@/lib/contracts/openai";
import { apiRoute } from "@/lib/http/api-route";
import { textCompletionStreamFrames } from "@/lib/http/openai-frames";
import { sseResponse } from "@/lib/http/sse";
import { teamLimits } from "@/lib/limits";
import { deploymentCapture, requestedCapture } from "@/lib/services/capture";
import { resolveChatModel } from "@/lib/services/chat-completions";
import { openStreamOnDeployment } from "@/lib/services/deployment-completions";
import {
  collectOnDeployment,
  promptText,
  textCompletionMeta,
  toTextCompletion,
  toTextCompletionParams,
} from "@/lib/services/openai-completions";

export const dynamic = "force-dynamic";

export const POST = apiRoute({ body: CompletionsBody }, async ({ req, requestId, handle, principal, body }) => {
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
  });
  const meta = textCompletionMeta(name);
  const meter = {
    quota: { keyId: principal.key.id, limits: teamLimits(principal.team) },
    teamSlug: principal.team.slug,
  };
  // Aborted when the client disconnects, or when the response stream is cancelled.
  const controller = new AbortController();
  req.signal.addEventListener("abort", () => controller.abort(), { once: true });
  const call = { signal: controller.signal, requestId, meter, capture };
  if (body.stream) {
    const events = await openStreamOnDeployment(handle.db, deployment, params, call);
    const options = { logprobs: body.logprobs, includeUsage: body.stream_options?.include_usage ?? false };
    return sseResponse(textCompletionStreamFrames(events, meta, requestId, options), {
      onCancel: () => controller.abort(),
    });
  }
  return toTextCompletion(await collectOnDeployment(handle.db, deployment, params, call), meta, body.logprobs);
});
