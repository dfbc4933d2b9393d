// A streamed chat completion as server-sent events: data-only chunks in the OpenAI chunk format
// (as OpenAI sends them: openai-node 4-5 and openai-python 1.x hand a chunk that names an event
// back as `{event, data}`, so `chunk.choices` was undefined for their users), the usage on the
// last chunk (with `stream_options.include_usage`, OpenAI's own last chunk: empty `choices` and
// the usage), then `data: [DONE]`. Every choice opens with `delta.role`, one that ends without
// text too (clients that rebuild the message need it). With logprobs, a chunk carries those of
// the tokens whose text it holds. A failure mid-stream is an `event: error` (which the OpenAI
// clients raise as an APIError) and the stream ends there.
import type { ChatCompletionChunk } from "../contracts/chat-completions";
import type { GenerationStreamEvent } from "../contracts/generation";
import type { chatCompletionMeta } from "../services/chat-completions";
import { chatUsage } from "../services/chat-completions";
import { chatLogprobs, pieces } from "../services/openai-completions";
import { clientGone, midStreamError, publicReason } from "./deployment-frames";
import { sseFrame } from "./sse";

type Choice = ChatCompletionChunk["choices"][number];

export async function* chatStreamFrames(
  events: AsyncIterable<GenerationStreamEvent>,
  meta: ReturnType<typeof chatCompletionMeta>,
  requestId: string,
  options: { logprobs?: number; includeUsage?: boolean } = {},
): AsyncIterable<string> {
  const chunk = (choices: Choice[], extra: Partial<ChatCompletionChunk> = {}) =>
    sseFrame({ ...meta, object: "chat.completion.chunk", choices, ...extra } satisfies ChatCompletionChunk);
  const started = new Set<number>();
  // The latest finish is held back so that the last chunk carries both a choice and the usage:
  // a client reading `choices[0]` on every chunk never meets an empty list.
  let heldFinish: Choice | undefined;
  try {
    for await (const e of pieces(events, options.logprobs !== undefined)) {
      if (e.type === "text") {
        const first = !started.has(e.index);
        started.add(e.index);
        const delta = first ? { role: "assistant" as const, content: e.text } : { content: e.text };
        const logprobs = options.logprobs === undefined ? null : chatLogprobs(e.tokens ?? [], options.logprobs);
        yield chunk([{ index: e.index, delta, finish_reason: null, logprobs }]);
      } else if (e.type === "finish") {
        // A choice that ended before any text (an end of sequence or a stop at once) still opens.
        const delta = started.has(e.index) ? {} : { role: "assistant" as const, content: "" };
        started.add(e.index);
        const finish = { index: e.index, delta, finish_reason: publicReason(e.finish_reason), logprobs: null };
        if (options.includeUsage) {
          yield chunk([finish]);
          continue;
        }
        if (heldFinish) yield chunk([heldFinish]);
        heldFinish = finish;
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
