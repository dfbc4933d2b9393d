import type { Message } from "./sample-checks";

/**
 * Counts a conversation's tokens (with the tools it was offered, which a template renders into
 * the prompt); throws a TemplateRefusal for one the chat template refuses.
 */
export type TokenCounter = (messages: Message[], tools?: unknown[]) => number;

/**
 * The model's chat template refused a conversation (its `raise_exception`: a system message the
 * model does not take, roles that do not alternate): the sample is left out, not the dataset.
 */
export class TemplateRefusal extends Error {
  override name = "TemplateRefusal";
}

/**
 * The token counter of a deployment's model: its tokenizer and chat template, loaded with
 * transformers.js straight from the model folder (or hub id). This is the packager's one seam to
 * the model: the engine's own loading can change without touching packaging.
 *
 * A conversation counts as the model would see it in training: the chat template rendered over
 * every message with no generation prompt, encoded without adding special tokens (the template
 * writes its own). A model without a template gets the engine's plain `role: content` lines,
 * with the tokenizer's special tokens (its BOS), as the engine encodes them.
 */
export async function loadTokenCounter(model: string, signal?: AbortSignal): Promise<TokenCounter> {
  // Imported on first use: transformers.js and ONNX Runtime (~150 MB resident) stay out of a
  // worker that never counts tokens, as the engine keeps them out until its first model. The
  // engine's loader gives the same folder (hub ids from its cache) and chat template the
  // deployment generates with; a model without one has the engine's `role: content` lines.
  const { loadTokenizer } = await import("../engine/model/load-model");
  // A hub id downloads the tokenizer's files only (not the weights), stopped by `signal`.
  const { tokenizer, chatTemplate } = await loadTokenizer(model, signal ? { signal } : {});
  // As the engine encodes a chat (request-plan.ts): a model's template writes its special tokens,
  // the fallback none, so the tokenizer's (BOS) are added to it.
  const special = chatTemplate === "fallback";
  const render = (messages: Message[], tools?: unknown[]): string => {
    try {
      // A template reads `content` as a string: a tool-call message without one renders it empty.
      return tokenizer.apply_chat_template(
        messages.map((m) => ({ ...m, content: m.content ?? "" })),
        { tokenize: false, add_generation_prompt: false, ...(tools ? { tools: tools as never } : {}) },
      ) as string;
    } catch (e) {
      throw new TemplateRefusal((e as Error).message, { cause: e });
    }
  };
  // A template that cannot render the plainest conversation (one the engine's Jinja cannot run)
  // would refuse every sample: the dataset READY and empty. Refused here, the packaging fails
  // and says why.
  render([
    { role: "user", content: "Hello" },
    { role: "assistant", content: "Hi" },
  ]);
  return (messages, tools) => tokenizer.encode(render(messages, tools), { add_special_tokens: special }).length;
}
