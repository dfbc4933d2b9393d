import { z } from "zod";
import { CaptureBody } from "./capture";
import { StopList } from "./deployments";
import { MAX_CONTEXT_TOKENS, MAX_N } from "./generation";
import { ChatLogprobs, MAX_TOP_LOGPROBS, StreamOptions } from "./openai";
import { storable } from "./text";
import { ChatMessageSchema } from "./pipelines";

/**
 * POST /v1/chat/completions: the spec's chat and prompt completion, with the fields that let
 * the official OpenAI clients work unchanged against it. Decisions are in docs/api.md.
 */

/** `null` means "not given". */
const optional = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v) => v ?? undefined);
const unit = z.number().min(0).max(1);

/** A text part of a message's content, as clients send it (`[{"type": "text", "text": "…"}]`). */
const TextPart = z.strictObject({
  type: z.literal("text", { error: "only text parts are supported" }),
  text: storable(z.string()),
});

/**
 * A message as OpenAI clients send it: `content` a string or text parts (joined with a newline,
 * as vLLM joins them), and the `developer` role (OpenAI's name for system instructions on newer
 * models) taken as `system`. What reaches the model, and what capture stores, is the plain
 * message of ChatMessageSchema.
 */
const ChatInputMessage = z
  .strictObject({
    role: z.enum(["system", "developer", "user", "assistant"]),
    content: z.union([storable(z.string()), z.array(TextPart).min(1, "must contain at least one part")]),
  })
  .transform((m) => ({
    role: m.role === "developer" ? ("system" as const) : m.role,
    content: typeof m.content === "string" ? m.content : m.content.map((p) => p.text).join("\n"),
  }))
  .pipe(ChatMessageSchema);

const MaxTokens = z.number().int().min(1).max(MAX_CONTEXT_TOKENS);

export const ChatCompletionBody = z
  .strictObject({
    /** `team-slug/deployment-name`, or a deployment name of the caller's team. */
    model: storable(z.string().min(1, "must not be empty")),
    messages: optional(z.array(ChatInputMessage).min(1, "must contain at least one message")),
    prompt: optional(z.string().min(1, "must not be empty")),
    max_tokens: optional(MaxTokens),
    /** OpenAI's newer name of max_tokens (the same limit). */
    max_completion_tokens: optional(MaxTokens),
    /** OpenAI's end-user label: accepted, not used (capture labels a sample with `pipeline.userId`). */
    user: optional(storable(z.string().max(256))),
    /** Only the values that change nothing are accepted (what clients send by default). */
    presence_penalty: optional(z.literal(0, { error: "only 0 is supported" })),
    frequency_penalty: optional(z.literal(0, { error: "only 0 is supported" })),
    temperature: optional(unit),
    /** The spelling of the spec's parameter table. */
    temeperature: optional(unit),
    top_p: optional(unit),
    n: optional(z.number().int().min(1).max(MAX_N)),
    seed: optional(z.number().int().min(0).max(Number.MAX_SAFE_INTEGER)),
    stop: optional(StopList),
    stream: optional(z.boolean()),
    /**
     * `include_usage: true`: OpenAI's last chunk (empty `choices`, the usage). Otherwise the
     * last chunk with a choice carries the usage, as it always has.
     */
    stream_options: optional(StreamOptions),
    /** Each generated token's logprob in `choices[].logprobs.content`. */
    logprobs: optional(z.boolean()),
    /** With `logprobs: true`: the most likely tokens at each step, 0-5. */
    top_logprobs: optional(z.number().int().min(0).max(MAX_TOP_LOGPROBS)),
    /** Capture: store the finished choices as samples of this pipeline (docs/api.md "Capture"). */
    pipeline: optional(CaptureBody),
  })
  .superRefine((b, ctx) => {
    if (!b.messages === !b.prompt)
      ctx.addIssue({
        code: "custom",
        path: [b.messages ? "prompt" : "messages"],
        message: "give exactly one of messages and prompt",
      });
    if (b.temperature !== undefined && b.temeperature !== undefined)
      ctx.addIssue({ code: "custom", path: ["temeperature"], message: "give either temperature or temeperature" });
    if (b.top_logprobs !== undefined && !b.logprobs)
      ctx.addIssue({ code: "custom", path: ["top_logprobs"], message: "needs logprobs: true" });
    if (b.stream_options && !b.stream)
      ctx.addIssue({ code: "custom", path: ["stream_options"], message: "only allowed with stream: true" });
    if (b.max_tokens !== undefined && b.max_completion_tokens !== undefined && b.max_tokens !== b.max_completion_tokens)
      ctx.addIssue({
        code: "custom",
        path: ["max_completion_tokens"],
        message: "give either max_tokens or max_completion_tokens (or the same value)",
      });
  })
  .transform(({ max_completion_tokens, user: _user, presence_penalty: _p, frequency_penalty: _f, ...b }) => ({
    ...b,
    max_tokens: b.max_tokens ?? max_completion_tokens,
  }));
export type ChatCompletionInput = z.infer<typeof ChatCompletionBody>;

export const ChatFinishReason = z.enum(["stop", "length"]);

export const ChatUsage = z.strictObject({
  input_tokens: z.number().int().min(0),
  output_tokens: z.number().int().min(0),
  total_tokens: z.number().int().min(0),
  prompt_tokens: z.number().int().min(0),
  completion_tokens: z.number().int().min(0),
});

export const ChatCompletionResponse = z.strictObject({
  id: z.string().startsWith("chatcmpl-"),
  object: z.literal("chat.completion"),
  created: z.number().int(),
  model: z.string(),
  choices: z
    .array(
      z.strictObject({
        index: z.number().int().min(0),
        message: z.strictObject({ role: z.literal("assistant"), content: z.string() }),
        finish_reason: ChatFinishReason,
        /** Null unless `logprobs: true` was asked for. */
        logprobs: ChatLogprobs.nullable(),
      }),
    )
    .min(1),
  usage: ChatUsage,
  /** The spec's top-level message: the (first) generated text. */
  message: z.strictObject({ content: z.string() }),
});
export type ChatCompletionResult = z.infer<typeof ChatCompletionResponse>;

/** One data-only chunk of a streamed chat completion (then `data: [DONE]`). */
export const ChatCompletionChunk = z.strictObject({
  id: z.string().startsWith("chatcmpl-"),
  object: z.literal("chat.completion.chunk"),
  created: z.number().int(),
  model: z.string(),
  choices: z.array(
    z.strictObject({
      index: z.number().int().min(0),
      delta: z.strictObject({ role: z.literal("assistant").optional(), content: z.string().optional() }),
      finish_reason: ChatFinishReason.nullable(),
      /** With `logprobs: true`, the logprobs of the tokens whose text this chunk carries. */
      logprobs: ChatLogprobs.nullable(),
    }),
  ),
  /** Only on the last chunk (with `stream_options.include_usage`, one with empty `choices`). */
  usage: ChatUsage.optional(),
});
export type ChatCompletionChunk = z.infer<typeof ChatCompletionChunk>;
