import { z } from "zod";
import { CaptureBody } from "./capture";
import { LogitBias, StopList } from "./deployments";
import { storable } from "./text";
import { MAX_BAD_WORD_CHARS, MAX_CONTEXT_TOKENS, MAX_N, MAX_TOP_K } from "./generation";

/**
 * The OpenAI-style surface beyond chat: POST /v1/completions and GET /v1/models, in OpenAI's
 * shapes so that the official clients work unchanged. What each field does, and what is refused,
 * is in docs/api.md ("OpenAI-compatible API").
 */

/** `null` means "not given". */
const optional = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v) => v ?? undefined);
const unit = z.number().min(0).max(1);

/** The most `logprobs` (completions) or `top_logprobs` (chat) the engine computes per token. */
export const MAX_TOP_LOGPROBS = 5;

export const StreamOptions = z.strictObject({
  /** A last chunk with the usage and an empty `choices` list, before `data: [DONE]`. */
  include_usage: optional(z.boolean()),
});

export const CompletionsBody = z
  .strictObject({
    /** `team-slug/deployment-name`, or a deployment name of the caller's team (as for chat). */
    model: storable(z.string().min(1, "must not be empty")),
    /** One prompt: a string, or an array of exactly one string. */
    prompt: z.union([z.string(), z.array(z.string())], { error: "must be a string or an array of one string" }),
    max_tokens: optional(z.number().int().min(1).max(MAX_CONTEXT_TOKENS)),
    temperature: optional(unit),
    top_p: optional(unit),
    n: optional(z.number().int().min(1).max(MAX_N)),
    stop: optional(StopList),
    seed: optional(z.number().int().min(0).max(Number.MAX_SAFE_INTEGER)),
    echo: optional(z.boolean()),
    /** Capture: store the finished choices as samples of this pipeline (docs/api.md "Capture"). */
    pipeline: optional(CaptureBody),
    /** The `logprobs` most likely tokens at each step (0: only the chosen token's). */
    logprobs: optional(z.number().int().min(0).max(MAX_TOP_LOGPROBS)),
    stream: optional(z.boolean()),
    stream_options: optional(StreamOptions),
    /** Only the values that change nothing are accepted (what clients send by default). */
    best_of: optional(z.number().int().min(1).max(MAX_N)),
    presence_penalty: optional(z.literal(0, { error: "only 0 is supported" })),
    frequency_penalty: optional(z.literal(0, { error: "only 0 is supported" })),
    /** The deployment endpoint's sampling parameters, under the same names. */
    top_k: optional(z.number().int().min(1).max(MAX_TOP_K)),
    repetition_penalty: optional(z.number().min(1)),
    bad_words: optional(z.array(z.string().min(1, "must not be empty").max(MAX_BAD_WORD_CHARS)).max(64)),
    logit_bias: optional(LogitBias),
    tfs: optional(unit),
  })
  .superRefine((b, ctx) => {
    if (Array.isArray(b.prompt) && b.prompt.length !== 1)
      ctx.addIssue({
        code: "custom",
        path: ["prompt"],
        message: "takes one prompt per request (an array of one string)",
      });
    else if ((Array.isArray(b.prompt) ? b.prompt[0] : b.prompt) === "")
      ctx.addIssue({
        code: "custom",
        path: Array.isArray(b.prompt) ? ["prompt", 0] : ["prompt"],
        message: "must not be empty",
      });
    if (b.best_of !== undefined && b.best_of !== (b.n ?? 1))
      ctx.addIssue({ code: "custom", path: ["best_of"], message: "only best_of equal to n is supported" });
    if (b.echo && b.logprobs !== undefined)
      ctx.addIssue({
        code: "custom",
        path: ["echo"],
        message: "echo with logprobs is not supported: prompt tokens are not scored",
      });
    if (b.stream_options && !b.stream)
      ctx.addIssue({ code: "custom", path: ["stream_options"], message: "only allowed with stream: true" });
  });
export type CompletionsInput = z.infer<typeof CompletionsBody>;

/** OpenAI's logprobs object of a text completion; the four lists have one entry per token. */
export const TextLogprobs = z.strictObject({
  /** The text each token added: joined, they are the choice's `text`. */
  tokens: z.array(z.string()),
  token_logprobs: z.array(z.number()),
  /** Per token: the most likely tokens and their logprobs, with the chosen token's. */
  top_logprobs: z.array(z.record(z.string(), z.number())),
  /** Where each token's text starts in the choice's `text`. */
  text_offset: z.array(z.number().int().min(0)),
});
export type TextLogprobs = z.infer<typeof TextLogprobs>;

export const TextFinishReason = z.enum(["stop", "length"]);

export const CompletionsUsage = z.strictObject({
  prompt_tokens: z.number().int().min(0),
  completion_tokens: z.number().int().min(0),
  total_tokens: z.number().int().min(0),
});

export const CompletionsResponse = z.strictObject({
  id: z.string().startsWith("cmpl-"),
  object: z.literal("text_completion"),
  created: z.number().int(),
  model: z.string(),
  choices: z
    .array(
      z.strictObject({
        text: z.string(),
        index: z.number().int().min(0),
        logprobs: TextLogprobs.nullable(),
        finish_reason: TextFinishReason,
      }),
    )
    .min(1),
  usage: CompletionsUsage,
});
export type CompletionsResult = z.infer<typeof CompletionsResponse>;

/** One `data:` chunk of a streamed completion (then `data: [DONE]`). */
export const CompletionsChunk = z.strictObject({
  id: z.string().startsWith("cmpl-"),
  object: z.literal("text_completion"),
  created: z.number().int(),
  model: z.string(),
  choices: z.array(
    z.strictObject({
      text: z.string(),
      index: z.number().int().min(0),
      logprobs: TextLogprobs.nullable(),
      finish_reason: TextFinishReason.nullable(),
    }),
  ),
  /** Only on the last chunk, with `stream_options.include_usage` (its `choices` is empty). */
  usage: CompletionsUsage.optional(),
});
export type CompletionsChunk = z.infer<typeof CompletionsChunk>;

/** Chat's logprobs: OpenAI's `choices[].logprobs.content`. */
const ChatTopLogprob = z.strictObject({
  token: z.string(),
  logprob: z.number(),
  /** The UTF-8 bytes of `token`. */
  bytes: z.array(z.number().int().min(0).max(255)).nullable(),
});
export const ChatLogprobs = z.strictObject({
  content: z.array(ChatTopLogprob.extend({ top_logprobs: z.array(ChatTopLogprob) })),
});
export type ChatLogprobs = z.infer<typeof ChatLogprobs>;

export const ModelObject = z.strictObject({
  /** `team-slug/deployment-name`: what `model` takes on the completion paths. */
  id: z.string(),
  object: z.literal("model"),
  /** Unix seconds: when the deployment was created. */
  created: z.number().int(),
  /** The team's slug. */
  owned_by: z.string(),
});

export type ModelObject = z.infer<typeof ModelObject>;

export const ModelList = z.strictObject({
  object: z.literal("list"),
  data: z.array(ModelObject),
});
export type ModelList = z.infer<typeof ModelList>;
