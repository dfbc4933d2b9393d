// Turns a generation request into what the scheduler needs: prompt token ids, resolved
// sampling parameters. All checks (including the context length) happen here, before any work.
import {
  generationRequestSchema,
  MAX_CONTEXT_TOKENS,
  type GenerationRequest,
  type GenerationRequestInput,
} from "@/lib/contracts/generation";
import { renderChat } from "./chat-template";
import { EngineError } from "./errors";
import type { LoadedModel } from "./model/load-model";
import type { SamplingParams } from "./sampler";

export interface RequestPlan {
  request: GenerationRequest;
  promptIds: number[];
  /** The prompt as text (echo): the given string, or the decoded ids. */
  promptText: string;
  sampling: SamplingParams;
  seed: number | undefined;
}

export function parseRequest(input: GenerationRequestInput | unknown): GenerationRequest {
  const parsed = generationRequestSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const param = issue.path.join(".") || undefined;
    throw new EngineError("invalid_request", `${param ? `${param}: ` : ""}${issue.message}`, param);
  }
  return parsed.data;
}

/** Characters of a long prompt tokenized first, per token of the limit, to refuse it cheaply. */
const PREFIX_CHARS_PER_TOKEN = 4;
/** Tokens the cut of that first part may add to its count (a word cut in two, say). */
const CUT_TOKENS = 32;

/**
 * A prompt's text is tokenized on the worker's thread, which every stream on the worker shares
 * (a million characters take seconds): one that cannot fit is refused before that. Longer than
 * the limit times the longest token: it cannot fit. Longer than 4 characters per token of the
 * limit: its first part is tokenized alone, and refused when that part alone is past the limit
 * by more than the few tokens the cut may add (only the text around the cut tokenizes
 * differently from the whole).
 */
function refuseTooLong(m: LoadedModel, text: string, maxTokens: number, addSpecial: boolean): void {
  const limit = Math.min(MAX_CONTEXT_TOKENS, m.info.contextLength);
  const room = limit - maxTokens;
  const tooLong = (what: string) =>
    new EngineError(
      "context_length_exceeded",
      `the prompt (${text.length} characters, ${what}) + max_tokens (${maxTokens}) exceeds the limit of ${limit} tokens ` +
        `(at most ${MAX_CONTEXT_TOKENS} per request; this model's context is ${m.info.contextLength})`,
      "max_tokens",
    );
  if (text.length > limit * m.info.maxTokenChars) throw tooLong(`more than ${limit} tokens`);
  const prefixChars = PREFIX_CHARS_PER_TOKEN * (limit + 1);
  if (text.length <= prefixChars) return;
  const counted =
    m.tokenizer.encode(text.slice(0, prefixChars), { add_special_tokens: addSpecial }).length - CUT_TOKENS;
  if (counted > room) throw tooLong(`at least ${counted} tokens`);
}

/** Temperatures below this are taken as 0 (greedy). */
export const GREEDY_BELOW = 1e-5;

export function planRequest(m: LoadedModel, input: GenerationRequestInput | unknown): RequestPlan {
  const request = parseRequest(input);
  const vocab = m.info.vocabSize;
  let promptIds: number[];
  let promptText: string;
  if (request.messages) {
    if (m.info.chatTemplateError)
      throw new EngineError(
        "internal",
        `this model's chat template cannot be rendered by the engine (${m.info.chatTemplateError}): ` +
          "send a prompt instead of messages",
        "messages",
      );
    promptText = renderChat(m.tokenizer, request.messages);
    // A model's template writes the special tokens itself (BOS, turn markers): none are added on
    // top. The engine's fallback template writes none, so the tokenizer's (BOS) are added, as for
    // a prompt: a base llama without its BOS answers noticeably worse.
    const special = m.info.chatTemplate === "fallback";
    refuseTooLong(m, promptText, request.max_tokens, special);
    promptIds = m.tokenizer.encode(promptText, { add_special_tokens: special });
  } else if (typeof request.prompt === "string") {
    refuseTooLong(m, request.prompt, request.max_tokens, true);
    promptIds = m.tokenizer.encode(request.prompt);
    promptText = request.prompt;
  } else if (request.prompt) {
    const bad = request.prompt.find((id) => id >= vocab);
    if (bad !== undefined)
      throw new EngineError(
        "invalid_request",
        `prompt token id ${bad} is outside the vocabulary (size ${vocab})`,
        "prompt",
      );
    promptIds = request.prompt;
    promptText = m.tokenizer.decode(promptIds, { skip_special_tokens: true, clean_up_tokenization_spaces: false });
  } else {
    throw new EngineError("invalid_request", "give exactly one of prompt and messages", "prompt");
  }
  if (promptIds.length === 0)
    throw new EngineError("invalid_request", "prompt must contain at least one token", "prompt");

  const limit = Math.min(MAX_CONTEXT_TOKENS, m.info.contextLength);
  const total = promptIds.length + request.max_tokens;
  if (total > limit) {
    throw new EngineError(
      "context_length_exceeded",
      `prompt tokens (${promptIds.length}) + max_tokens (${request.max_tokens}) = ${total} exceeds the limit of ${limit} tokens ` +
        `(at most ${MAX_CONTEXT_TOKENS} per request; this model's context is ${m.info.contextLength})`,
      "max_tokens",
    );
  }

  const bias = new Map<number, number>();
  for (const [key, value] of Object.entries(request.logit_bias)) {
    let id: number;
    if (/^\d+$/.test(key)) {
      id = Number(key);
      if (id >= vocab)
        throw new EngineError(
          "invalid_request",
          `logit_bias: token id ${id} is outside the vocabulary (size ${vocab})`,
          "logit_bias",
        );
    } else {
      // A string key means its first token (as the tokenizer splits that string on its own).
      const ids = m.tokenizer.encode(key, { add_special_tokens: false });
      if (ids.length === 0)
        throw new EngineError("invalid_request", `logit_bias: "${key}" has no tokens`, "logit_bias");
      id = ids[0];
    }
    bias.set(id, (bias.get(id) ?? 0) + value);
  }

  return {
    request,
    promptIds,
    promptText,
    seed: request.seed,
    sampling: {
      // Below GREEDY_BELOW a temperature is greedy: its limit, and dividing the logits by it
      // overflowed to +Inf (a token id drawn from NaN probabilities).
      temperature: request.temperature < GREEDY_BELOW ? 0 : request.temperature,
      topP: request.top_p,
      topK: request.top_k,
      tfs: request.tfs,
      repetitionPenalty: request.repetition_penalty,
      logprobs: request.logprobs,
      bias,
    },
  };
}
