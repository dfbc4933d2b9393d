// A streamed chat completion as server-sent events: `event: message` chunks in the OpenAI
// chunk format, the usage on the last chunk, then `data: [DONE]`. A failure mid-stream is an
// `event: error` (which the OpenAI clients raise as an APIError) and the stream ends there.
import type { ChatCompletionChunk } from "../contracts/chat-completions";
import type { GenerationStreamEvent } from "../contracts/generation";
import type { chatCompletionMeta } from "../services/chat-completions";
import { chatUsage } from "../services/chat-completions";
import { clientGone, midStreamError, publicReason } from "./deployment-frames";
import { sseFrame } from "./sse";

type Choice = ChatCompletionChunk["choices"][number];

export async function* chatStreamFrames(
  events: AsyncIterable<GenerationStreamEvent>,
  meta: ReturnType<typeof chatCompletionMeta>,
  requestId: string,
): AsyncIterable<string> {
  const chunk = (choices: Choice[], extra: Partial<ChatCompletionChunk> = {}) =>
    sseFrame({ ...meta, object: "chat.completion.chunk", choices, ...extra } satisfies ChatCompletionChunk, "message");
  const started = new Set<number>();
  // The latest finish is held back so that the last chunk carries both a choice and the usage:
  // a client reading `choices[0]` on every chunk never meets an empty list.
  let heldFinish: Choice | undefined;
  try {
    for await (const e of events) {
      if (e.type === "delta" && e.text) {
        const first = !started.has(e.index);
        started.add(e.index);
        const delta = first ? { role: "assistant" as const, content: e.text } : { content: e.text };
        yield chunk([{ index: e.index, delta, finish_reason: null, logprobs: null }]);
      } else if (e.type === "finish") {
        if (heldFinish) yield chunk([heldFinish]);
        heldFinish = { index: e.index, delta: {}, finish_reason: publicReason(e.finish_reason), logprobs: null };
      } else if (e.type === "done") {
        yield chunk(heldFinish ? [heldFinish] : [], { usage: chatUsage(e.usage) });
      }
    }
  } catch (e) {
    if (clientGone(e)) return;
    yield sseFrame({ error: midStreamError(e, requestId) }, "error");
    return;
  }
  yield sseFrame("[DONE]");
}
