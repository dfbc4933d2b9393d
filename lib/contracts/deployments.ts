import { z } from "zod";
import { DtypeChoiceSchema } from "./models";
import { CaptureBody } from "./capture";
import { recordWithoutProto, storable } from "./text";
import { UpstreamDto, UpstreamInput } from "./upstream";
import { MAX_BAD_WORD_CHARS, MAX_CONTEXT_TOKENS, MAX_LOGIT_BIAS, MAX_N, MAX_STOP_CHARS, MAX_TOP_K } from "./generation";

/**
 * The deployment endpoints ({PUBLIC_URL}/deployments/{team}/{name}) as zod schemas shared by
 * the route handlers and the tests. Decisions the spec leaves open are in docs/api.md.
 */

/** Names appear in URLs: a letter or digit first (so never "." or ".."), then up to 63 of [a-z0-9._-]. */
export const DeploymentName = z
  .string()
  .regex(
    /^[a-z0-9][a-z0-9._-]{0,63}$/,
    "must be 1-64 lower-case letters, digits, '-', '_' or '.', starting with a letter or digit",
  );

export const DeploymentModel = storable(z.string().trim().min(1, "must not be empty").max(1000));

/** `null` means "not given" for every optional parameter (the spec lists null defaults). */
const optional = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v) => v ?? undefined);

const unit = z.number().min(0).max(1);
/** One string or a list of them (the examples send a list; OpenAI-style clients often one string). */
const StopString = z
  .string()
  .min(1, "must not be empty")
  .max(MAX_STOP_CHARS, `must be at most ${MAX_STOP_CHARS} characters`);
export const StopList = z
  .union([StopString, z.array(StopString).max(16)], {
    error: "must be a string or an array of strings",
  })
  .transform((v) => (typeof v === "string" ? [v] : v));

/** The sampling parameters both the POST body and the GET query accept, with the spec's ranges. */
const SamplingShape = {
  prompt: z.string().min(1, "must not be empty"),
  max_tokens: optional(z.number().int().min(1).max(MAX_CONTEXT_TOKENS)),
  temperature: optional(unit),
  top_p: optional(unit),
  top_k: optional(z.number().int().min(1).max(MAX_TOP_K)),
  /** 1 means no penalty; the spec's "greater than 1" is read as "at least 1" so 1.0 is not an error. */
  repetition_penalty: optional(z.number().min(1)),
  stop: optional(StopList),
  /** The name the spec's request examples use for `stop`. */
  stop_sequences: optional(StopList),
  seed: optional(z.number().int().min(0).max(Number.MAX_SAFE_INTEGER)),
};

const oneStopList = <T extends { stop?: string[]; stop_sequences?: string[] }>(b: T, ctx: z.RefinementCtx) => {
  if (b.stop && b.stop_sequences)
    ctx.addIssue({ code: "custom", path: ["stop_sequences"], message: "give either stop or stop_sequences, not both" });
};

/** Token (or text) → bias; `__proto__` is refused rather than silently dropped by zod's record. */
export const LogitBias = recordWithoutProto(
  z
    .record(
      z.string().min(1).max(MAX_BAD_WORD_CHARS, `keys must be at most ${MAX_BAD_WORD_CHARS} characters`),
      z.number().min(-100).max(100),
    )
    .refine((b) => Object.keys(b).length <= MAX_LOGIT_BIAS, `must have at most ${MAX_LOGIT_BIAS} entries`),
  "a key",
);

export const DeploymentCompletionBody = z
  .strictObject({
    ...SamplingShape,
    n: optional(z.number().int().min(1).max(MAX_N)),
    echo: optional(z.boolean()),
    bad_words: optional(z.array(z.string().min(1, "must not be empty").max(MAX_BAD_WORD_CHARS)).max(64)),
    logit_bias: optional(LogitBias),
    tfs: optional(unit),
    logprobs: optional(z.number().int().min(1).max(5)),
    stream: optional(z.boolean()),
    /** Capture: store the finished choices as samples of this pipeline (docs/api.md "Capture"). */
    pipeline: optional(CaptureBody),
  })
  .superRefine(oneStopList);
export type DeploymentCompletionInput = z.infer<typeof DeploymentCompletionBody>;

/** GET {deployment_url}: the spec's subset, after the query string has been read into values. */
export const DeploymentStreamQuery = z.strictObject(SamplingShape).superRefine(oneStopList);
export type DeploymentStreamInput = z.infer<typeof DeploymentStreamQuery>;

const TokenLogprob = z.object({ token: z.string(), token_id: z.number().int(), logprob: z.number() });
export const GeneratedTokenLogprob = TokenLogprob.extend({ top_logprobs: z.array(TokenLogprob) });

export const FinishReason = z.enum(["stop", "length"]);

export const TokenUsage = z.strictObject({
  prompt_tokens: z.number().int().min(0),
  completion_tokens: z.number().int().min(0),
  total_tokens: z.number().int().min(0),
});

export const CompletionItem = z.strictObject({
  index: z.number().int().min(0),
  completion: z.string(),
  finish_reason: FinishReason,
  /** The stop string that ended this completion (cut from it), or null. */
  stop: z.string().nullable(),
  /** Only when `logprobs` was asked for: one entry per generated token. */
  logprobs: z.array(GeneratedTokenLogprob).optional(),
});

export const DeploymentCompletionResponse = z.strictObject({
  result: z.array(CompletionItem).min(1),
  usage: TokenUsage,
});
export type DeploymentCompletionResult = z.infer<typeof DeploymentCompletionResponse>;

/** One `data:` event of POST with `stream: true` (the stream then ends with `data: [DONE]`). */
export const DeploymentStreamChunk = z.union([
  z.strictObject({
    index: z.number().int().min(0),
    completion: z.string(),
    logprobs: z.array(GeneratedTokenLogprob).optional(),
  }),
  z.strictObject({
    index: z.number().int().min(0),
    completion: z.literal(""),
    finish_reason: FinishReason,
    stop: z.string().nullable(),
  }),
  z.strictObject({ usage: TokenUsage }),
  z.strictObject({
    error: z.object({ type: z.string(), message: z.string(), param: z.string().optional() }),
  }),
]);
export type DeploymentStreamChunk = z.infer<typeof DeploymentStreamChunk>;

/** GET stream: `event: update` data. */
export const StreamUpdateEvent = z.strictObject({ completion: z.string().min(1) });
/** GET stream: `event: end` data (after an `event: error`, finish_reason is "error"). */
export const StreamEndEvent = z.strictObject({
  finish_reason: z.enum(["stop", "length", "error"]),
  stop: z.string().nullable(),
  usage: TokenUsage.nullable(),
});

/** Creating a deployment (dashboard; the CLI's deployment:create takes the same fields). */
export const CreateDeploymentBody = z
  .strictObject({
    name: DeploymentName,
    /** A local deployment: the model the workers load… */
    model: DeploymentModel.optional(),
    dtype: DtypeChoiceSchema.default("auto"),
    /** …or an upstream one: the OpenAI-compatible servers that serve it (docs/api.md). */
    upstream: UpstreamInput.optional(),
  })
  .superRefine((b, ctx) => {
    if (b.model === undefined && b.upstream === undefined)
      ctx.addIssue({ code: "custom", path: ["model"], message: "must not be empty" });
    if (b.model !== undefined && b.upstream !== undefined)
      ctx.addIssue({ code: "custom", path: ["upstream"], message: "give either model or upstream, not both" });
  });
export type CreateDeploymentInput = z.input<typeof CreateDeploymentBody>;

/** A deployment as the workers see it (lib/services/deployment-state.ts). */
export const DeploymentStateSchema = z.strictObject({
  state: z.enum(["pending", "downloading", "loading", "ready", "failed"]),
  /** The file the engine runs (auto resolved), once known. */
  dtype: z.string().nullable(),
  /** Downloading: bytes so far and in all, and the percentage. */
  progress: z.strictObject({ done: z.number(), total: z.number(), percent: z.number() }).nullable(),
  /**
   * Failed: why (and the engine's classification of it); pending: what it waits for; ready: how
   * the model is served slower than it could be, and why (null when it is not).
   */
  message: z.string().nullable(),
  reason: z.string().nullable(),
});
export type DeploymentState = z.infer<typeof DeploymentStateSchema>;

export const DeploymentDto = z.strictObject({
  id: z.string(),
  teamId: z.string(),
  name: z.string(),
  model: z.string(),
  dtype: DtypeChoiceSchema,
  url: z.string().url(),
  createdAt: z.string(),
  status: DeploymentStateSchema,
  /** Upstream deployments only: the servers that answer (never their key). */
  upstream: UpstreamDto.optional(),
});
export type DeploymentDto = z.infer<typeof DeploymentDto>;
