import { z } from "zod";
import { CaptureBody } from "./capture";
import { StopList } from "./deployments";
import { MAX_CONTEXT_TOKENS, MAX_N } from "./generation";
import { ChatMessageSchema } from "./pipelines";

/**
 * POST /v1/chat/completions: the spec's chat and prompt completion, with the fields that let
 * the official OpenAI clients work unchanged against it. Decisions are in docs/api.md.
 */

/** `null` means "not given". */
const optional = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v) => v ?? undefined);
const unit = z.number().min(0).max(1);

export const ChatCompletionBody = z
  .strictObject({
    /** `team-slug/deployment-name`, or a deployment name of the caller's team. */
    model: z.string().min(1, "must not be empty"),
    messages: optional(z.array(ChatMessageSchema).min(1, "must contain at least one message")),
    prompt: optional(z.string().min(1, "must not be empty")),
    max_tokens: optional(z.number().int().min(1).max(MAX_CONTEXT_TOKENS)),
    temperature: optional(unit),
    /** The spelling of the spec's parameter table. */
    temeperature: optional(unit),
    top_p: optional(unit),
    n: optional(z.number().int().min(1).max(MAX_N)),
    seed: optional(z.number().int().min(0).max(Number.MAX_SAFE_INTEGER)),
    stop: optional(StopList),
    stream: optional(z.boolean()),
    /** Accepted for OpenAI clients; the last streamed chunk always carries the usage. */
    stream_options: optional(z.object({ include_usage: z.boolean().optional() })),
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
  });
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
        logprobs: z.null(),
      }),
    )
    .min(1),
  usage: ChatUsage,
  /** The spec's top-level message: the (first) generated text. */
  message: z.strictObject({ content: z.string() }),
});
export type ChatCompletionResult = z.infer<typeof ChatCompletionResponse>;

/** One `event: message` chunk of a streamed chat completion (then `data: [DONE]`). */
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
      logprobs: z.null(),
    }),
  ),
  /** Only on the last chunk. */
  usage: ChatUsage.optional(),
});
export type ChatCompletionChunk = z.infer<typeof ChatCompletionChunk>;
