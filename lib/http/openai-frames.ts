// A streamed POST /v1/completions as OpenAI streams it: data-only events, each a
// `text_completion` chunk, then `data: [DONE]`. With `stream_options.include_usage`, a last chunk
// with empty `choices` carries the usage. A failure mid-stream is `data: {"error":{…}}` (which the
// OpenAI clients raise as an APIError) and the stream ends there, without [DONE].
import type { CompletionsChunk } from "../contracts/openai";
import type { GenerationStreamEvent } from "../contracts/generation";
import { pieces, textLogprobs, type TextCompletionMeta } from "../services/openai-completions";
import { clientGone, midStreamError } from "./deployment-frames";
import { sseFrame } from "./sse";

export async function* textCompletionStreamFrames(
  events: AsyncIterable<GenerationStreamEvent>,
  meta: TextCompletionMeta,
  requestId: string,
  options: { logprobs?: number; includeUsage?: boolean },
): AsyncIterable<string> {
  const chunk = (choices: CompletionsChunk["choices"], extra: Partial<CompletionsChunk> = {}) =>
    sseFrame({ ...meta, object: "text_completion", choices, ...extra } satisfies CompletionsChunk);
  // Where the next text of each choice starts (text_offset).
  const offsets = new Map<number, number>();
  try {
    for await (const p of pieces(events, options.logprobs !== undefined)) {
      if (p.type === "text") {
        const offset = offsets.get(p.index) ?? 0;
        offsets.set(p.index, offset + p.text.length);
        const logprobs = options.logprobs === undefined ? null : textLogprobs(p.tokens ?? [], offset, options.logprobs);
        yield chunk([{ text: p.text, index: p.index, logprobs, finish_reason: null }]);
      } else if (p.type === "finish") {
        yield chunk([{ text: "", index: p.index, logprobs: null, finish_reason: p.finish_reason }]);
      } else if (options.includeUsage) {
        yield chunk([], { usage: p.usage });
      }
    }
  } catch (e) {
    if (clientGone(e)) return;
    yield sseFrame({ error: midStreamError(e, requestId) });
    return;
  }
  yield sseFrame("[DONE]");
}
