import { z } from "zod";

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
} as const;

/**
 * Postgres text and jsonb cannot hold U+0000: refused here with a 400 naming the field, rather
 * than failing in the database (where it would also fail every add batched with it).
 */
const noNul = <S extends z.ZodString>(schema: S) =>
  schema.refine((s) => !s.includes("\u0000"), "must not contain the NUL character (\\u0000)");

export const ChatMessageSchema = z.strictObject({
  role: z.enum(["system", "user", "assistant"]),
  content: noNul(z.string()),
});

const Label = noNul(z.string().min(1, "must not be empty").max(LIMITS.labelChars));

export const MetadataSchema = z
  .record(
    noNul(z.string().min(1, "keys must not be empty").max(LIMITS.metadataKeyChars)),
    noNul(z.string({ error: "metadata values must be strings" }).max(LIMITS.metadataValueChars)),
  )
  .refine((m) => Object.keys(m).length <= LIMITS.metadataKeys, {
    message: `at most ${LIMITS.metadataKeys} keys`,
  });

/** `null` is accepted wherever a label is optional and means "not given". */
const optional = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v) => v ?? undefined);

export const CreatePipelineBody = z.strictObject({
  name: noNul(z.string().trim().min(1, "must not be empty").max(LIMITS.pipelineNameChars)),
});

export const AddSampleBody = z.strictObject({
  messages: z.array(ChatMessageSchema).min(1, "must contain at least one message"),
  userId: optional(Label),
  groupId: optional(Label),
  metadata: optional(MetadataSchema),
});
export type AddSampleInput = z.infer<typeof AddSampleBody>;

export const SelectionFilterShape = {
  userId: optional(Label),
  groupId: optional(Label),
  metadata: optional(MetadataSchema),
  limit: optional(z.number().int().min(1)),
  offset: optional(z.number().int().min(0)),
};
export const SelectionBody = z.strictObject(SelectionFilterShape);
export type Selection = z.infer<typeof SelectionBody>;

/** count lists metadata as a string in the spec: accept an object or a JSON-encoded object. */
export const CountBody = z.strictObject({
  ...SelectionFilterShape,
  metadata: z.preprocess((v) => {
    if (typeof v !== "string") return v;
    try {
      return JSON.parse(v);
    } catch {
      return v; // fails the object schema below with a clear message
    }
  }, optional(MetadataSchema)),
});

// ---- responses ----

export const PipelineSchema = z.object({
  id: z.string().startsWith("pipe_"),
  teamId: z.string(),
  name: z.string(),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
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
