// Engine-independent contract of a text-generation request and its result/stream events.
// Used by the worker's internal server and (later) the app's deployment endpoints.
import { z } from "zod";
import { DtypeChoiceSchema } from "./models";

/** A bad word longer than this is no word: refused, which also bounds the guard's work per step. */
export const MAX_BAD_WORD_CHARS = 128;
/**
 * A stop string longer than this is refused (the matcher's work is linear in it, but a request
 * may not make every token's step carry kilobytes of stops).
 */
export const MAX_STOP_CHARS = 1000;
/** Entries of a logit_bias map: a string key is tokenized before generating, on the worker's thread. */
export const MAX_LOGIT_BIAS = 1024;
export const MAX_CONTEXT_TOKENS = 2048;
export const MAX_TOP_K = 50_400;
export const MAX_N = 16;

/** A chat turn; the worker renders `messages` with the model's chat template. */
export const generationMessageSchema = z.strictObject({
  role: z.enum(["system", "user", "assistant"]),
  content: z.string(),
});

export const generationRequestSchema = z
  .object({
    /** Model id as the worker knows it (a local folder or hub id). */
    model: z.string().min(1).optional(),
    /** Which of the model's files to run (the deployment's dtype); default auto. */
    dtype: DtypeChoiceSchema.optional(),
    /** Whose request this is (the app sends the team's id): the batch is shared fairly between tenants. */
    tenant: z.string().min(1).max(100).optional(),
    /** Exactly one of `prompt` and `messages`. */
    prompt: z.union([z.string(), z.array(z.number().int().min(0)).min(1)]).optional(),
    messages: z.array(generationMessageSchema).min(1).optional(),
    max_tokens: z.number().int().min(1).max(MAX_CONTEXT_TOKENS).default(16),
    /** 0 means greedy. */
    temperature: z.number().min(0).max(1).default(1),
    top_p: z.number().min(0).max(1).default(1),
    top_k: z.number().int().min(1).max(MAX_TOP_K).optional(),
    /** 1 = off; CTRL-style penalty over prompt and generated tokens. */
    repetition_penalty: z.number().min(1).default(1),
    stop: z.array(z.string().min(1).max(MAX_STOP_CHARS)).max(16).default([]),
    n: z.number().int().min(1).max(MAX_N).default(1),
    echo: z.boolean().default(false),
    bad_words: z.array(z.string().min(1).max(MAX_BAD_WORD_CHARS)).max(64).default([]),
    /** Key: a token id ("123") or a string whose first token is meant. Value: bias; -100 bans. */
    logit_bias: z
      .record(z.string().max(MAX_BAD_WORD_CHARS), z.number().min(-100).max(100))
      .refine((b) => Object.keys(b).length <= MAX_LOGIT_BIAS, `at most ${MAX_LOGIT_BIAS} entries`)
      .default({}),
    /** Tail-free sampling z; 1 = off. */
    tfs: z.number().min(0).max(1).default(1),
    logprobs: z.number().int().min(1).max(5).optional(),
    seed: z.number().int().optional(),
  })
  .strict()
  .superRefine((r, ctx) => {
    if ((r.prompt === undefined) === (r.messages === undefined))
      ctx.addIssue({ code: "custom", path: ["prompt"], message: "give exactly one of prompt and messages" });
  });

export type GenerationMessage = z.infer<typeof generationMessageSchema>;
export type GenerationRequestInput = z.input<typeof generationRequestSchema>;
export type GenerationRequest = z.output<typeof generationRequestSchema>;

export type FinishReason = "stop" | "length" | "cancelled";

export interface TokenLogprob {
  token: string;
  token_id: number;
  logprob: number;
}
export interface GeneratedTokenLogprobs extends TokenLogprob {
  /** The `logprobs` most likely tokens of the same distribution, most likely first. */
  top_logprobs: TokenLogprob[];
}

export interface GenerationChoice {
  index: number;
  /** With echo, the prompt text followed by the completion. */
  text: string;
  finish_reason: FinishReason;
  /** The stop string that ended generation; null when it ended otherwise (EOS, length). */
  stop: string | null;
  logprobs: GeneratedTokenLogprobs[] | null;
}

export interface GenerationUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface GenerationResult {
  model: string;
  choices: GenerationChoice[];
  usage: GenerationUsage;
}

/** Events of a streamed generation; `delta` texts of one choice concatenate to its `text`. */
export type GenerationStreamEvent =
  | { type: "delta"; index: number; text: string; logprobs?: GeneratedTokenLogprobs[] }
  | { type: "finish"; index: number; finish_reason: FinishReason; stop: string | null }
  | { type: "done"; usage: GenerationUsage }
  | { type: "error"; error: GenerationErrorBody["error"] };

export const generationErrorTypes = [
  "invalid_request",
  "unauthorized",
  "context_length_exceeded",
  "rate_limited",
  "internal",
] as const;
export type GenerationErrorType = (typeof generationErrorTypes)[number];

export interface GenerationErrorBody {
  error: { type: GenerationErrorType; message: string; param?: string };
}
