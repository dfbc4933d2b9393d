import { z } from "zod";
import { MESSAGE_LIMITS, SampleMessageSchema, ToolDefinitionSchema } from "./messages";
import { recordWithoutProto, storable } from "./text";

/**
 * The pipelines half of the hosted API, as zod schemas shared by the route handlers,
 * the dashboard and the tests. Limits the spec leaves open are documented in docs/api.md.
 */
export const LIMITS = {
  labelChars: 256,
  metadataKeys: 64,
  metadataKeyChars: 128,
  metadataValueChars: 512,
  pipelineNameChars: 200,
  inValues: 100,
  searchChars: 500,
  sampleSize: 1_000_000,
  retentionDays: 36_500,
  cursorChars: 256,
} as const;

/** The plain chat message of completions (a sample's messages may also be tool calls: messages.ts). */
export const ChatMessageSchema = z.strictObject({
  role: z.enum(["system", "user", "assistant"]),
  content: storable(z.string()),
});

const Label = storable(z.string().min(1, "must not be empty").max(LIMITS.labelChars));

const MetadataKey = storable(z.string().min(1, "keys must not be empty").max(LIMITS.metadataKeyChars));

/** (A filter on `__proto__` would match every sample, and delete-samples delete them all.) */
const withoutProto = <T extends z.ZodType>(schema: T) => recordWithoutProto(schema, "a metadata key");

export const MetadataSchema = withoutProto(
  z
    .record(
      MetadataKey,
      storable(z.string({ error: "metadata values must be strings" }).max(LIMITS.metadataValueChars)),
    )
    .refine((m) => Object.keys(m).length <= LIMITS.metadataKeys, {
      message: `at most ${LIMITS.metadataKeys} keys`,
    }),
);

/** `null` is accepted wherever a label is optional and means "not given". */
const optional = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v) => v ?? undefined);

const PipelineName = storable(z.string().trim().min(1, "must not be empty").max(LIMITS.pipelineNameChars));

export const CreatePipelineBody = z.strictObject({ name: PipelineName });

/**
 * PATCH /v1/pipelines/:id. `retentionDays: null` removes the retention period (samples are kept
 * forever); a field that is absent (or `name: null`) is left as it is.
 */
export const UpdatePipelineBody = z.strictObject({
  name: optional(PipelineName),
  retentionDays: z.number().int().min(1).max(LIMITS.retentionDays).nullable().optional(),
});
export type UpdatePipelineInput = z.infer<typeof UpdatePipelineBody>;

export const AddSampleBody = z.strictObject({
  messages: z.array(SampleMessageSchema).min(1, "must contain at least one message"),
  /** Beyond the spec: the tools the conversation's model was offered (OpenAI's fine-tuning lines). */
  tools: optional(
    z
      .array(ToolDefinitionSchema)
      .min(1, "must contain at least one tool")
      .max(MESSAGE_LIMITS.tools, `at most ${MESSAGE_LIMITS.tools} tools`),
  ).optional(),
  userId: optional(Label),
  groupId: optional(Label),
  metadata: optional(MetadataSchema),
});
export type AddSampleInput = z.infer<typeof AddSampleBody>;

const LabelValue = storable(z.string({ error: "metadata values must be strings" }).max(LIMITS.metadataValueChars));

/**
 * One metadata filter: a string (equality) or one operator. `$ne` also matches samples without
 * the key; `$in` any of 1-100 values; `$exists` whether the key is there; `$prefix` values that
 * start with the given (non-empty) string.
 */
export const MetadataCondition = z.union(
  [
    LabelValue,
    z.strictObject({ $ne: LabelValue }),
    z.strictObject({ $in: z.array(LabelValue).min(1).max(LIMITS.inValues) }),
    z.strictObject({ $exists: z.boolean() }),
    z.strictObject({ $prefix: LabelValue.min(1, "must not be empty") }),
  ],
  {
    error:
      'must be a string or one operator object: {"$ne": string}, {"$in": [string, …]}, {"$exists": boolean} or {"$prefix": string}',
  },
);
export type MetadataCondition = z.infer<typeof MetadataCondition>;

export const MetadataFilterSchema = withoutProto(
  z.record(MetadataKey, MetadataCondition).refine((m) => Object.keys(m).length <= LIMITS.metadataKeys, {
    message: `at most ${LIMITS.metadataKeys} keys`,
  }),
);
export type MetadataFilter = z.infer<typeof MetadataFilterSchema>;

/**
 * An ISO 8601 timestamp with a zone (`Z` or an offset); kept as given, so microseconds survive.
 * Within what Postgres reads: it refuses year 0000, offsets of 16 hours or more ("out of range"),
 * and a text over 128 characters (so at most 9 fractional digits here: Postgres keeps 6).
 */
const Timestamp = z.iso
  .datetime({ offset: true, error: "must be an ISO 8601 timestamp with a time zone" })
  .refine((s) => !/\.\d{10,}/.test(s), "must have at most 9 fractional digits of a second")
  .refine((s) => !s.startsWith("0000"), "must be in year 0001 or later")
  .refine((s) => !/[+-](1[6-9]|[2-9]\d):\d\d$/.test(s), "must have a time zone offset between -15:59 and +15:59");

export const SampleSpec = z.strictObject({
  size: z.number().int().min(1).max(LIMITS.sampleSize),
  seed: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
});

/**
 * Beyond the spec: conditions on a captured sample's generation facts (docs/api.md "Capture"), so
 * a dataset can keep the completions that finished (not those cut at max_tokens), or a data owner
 * find what one key or one deployment wrote. `captured`: true, captured samples only; false,
 * added ones only. Each other condition matches captured samples only.
 */
export const GenerationFilter = z.strictObject({
  captured: optional(z.boolean()),
  finishReason: optional(z.enum(["stop", "length"], { error: "must be 'stop' or 'length'" })),
  keyId: optional(Label),
  deployment: optional(Label),
});
export type GenerationFilter = Partial<z.infer<typeof GenerationFilter>>;

export const SelectionFilterShape = {
  userId: optional(Label),
  groupId: optional(Label),
  metadata: optional(MetadataFilterSchema),
  createdAfter: optional(Timestamp),
  createdBefore: optional(Timestamp),
  search: optional(storable(z.string().min(1, "must not be empty").max(LIMITS.searchChars))),
  generation: optional(GenerationFilter),
  /** Beyond the spec: the samples one import stored (`imp_…`, docs/api.md "Imports"). */
  importId: optional(Label),
  sample: optional(SampleSpec),
  limit: optional(z.number().int().min(1)),
  offset: optional(z.number().int().min(0)),
};
/**
 * A cursor: the id of a sample of the pipeline; the selection then lists only the samples after it
 * in selection order (the other filters, `offset` and `limit` apply after it).
 */
const Cursor = storable(z.string().min(1, "must not be empty").max(LIMITS.cursorChars));

export const SelectionBody = z.strictObject({ ...SelectionFilterShape, after: optional(Cursor) });
/** A selection: its filters, paging and sampling, and (samples and count only) a cursor. */
export type Selection = { [K in keyof typeof SelectionFilterShape]: z.infer<(typeof SelectionFilterShape)[K]> } & {
  after?: string;
};

/** count lists metadata as a string in the spec: accept an object or a JSON-encoded object. */
export const CountBody = z.strictObject({
  ...SelectionFilterShape,
  after: optional(Cursor),
  metadata: z.preprocess((v) => {
    if (typeof v !== "string") return v;
    try {
      return JSON.parse(v);
    } catch {
      return v; // fails the object schema below with a clear message
    }
  }, optional(MetadataFilterSchema)),
});

// ---- responses ----

export const PipelineSchema = z.object({
  id: z.string().startsWith("pipe_"),
  teamId: z.string(),
  name: z.string(),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
  /** Beyond the spec: samples older than this many days are deleted; null keeps them. */
  retentionDays: z.number().int().min(1).nullable(),
});
export type PipelineDto = z.infer<typeof PipelineSchema>;

export const SampleSchema = z.object({
  id: z.string(),
  length: z.number().int().min(1),
  pipelineId: z.string(),
  teamId: z.string(),
  createdAt: z.iso.datetime(),
  userId: z.string().nullable(),
  groupId: z.string().nullable(),
  metadata: z.record(z.string(), z.string()).nullable(),
  url: z.url(),
});
export type SampleDto = z.infer<typeof SampleSchema>;

export const AddSampleResponse = z.object({ id: z.string() });
export const CountResponse = z.object({ count: z.number().int().min(0) });
