import { z } from "zod";
import { AddSampleBody, LIMITS, MetadataSchema, type SampleDto } from "./pipelines";
import { storable } from "./text";

/**
 * Capture: a completion recorded into one of the team's pipelines as a sample (docs/api.md,
 * "Capture"). Asked for per request, by the body field `pipeline` or by the X-Pipeline-* headers;
 * the labels have the very limits of `add` (its own schemas are reused).
 */
export const CaptureBody = z.strictObject({
  /** The pipeline the sample goes to: one of the caller's team. */
  id: storable(z.string().min(1, "must not be empty").max(LIMITS.cursorChars)),
  userId: AddSampleBody.shape.userId,
  groupId: AddSampleBody.shape.groupId,
  metadata: AddSampleBody.shape.metadata,
});
export type CaptureInput = z.infer<typeof CaptureBody>;

/** The headers of the header form, and which field of CaptureBody each one carries. */
export const CAPTURE_HEADERS = {
  id: "X-Pipeline-Id",
  userId: "X-Pipeline-User-Id",
  groupId: "X-Pipeline-Group-Id",
  metadata: "X-Pipeline-Metadata",
} as const satisfies Record<keyof CaptureInput, string>;

/**
 * What was generated, kept with a captured sample (and shown in the dashboard's preview). The
 * token counts are the whole completion's (all `n` choices); `latencyMs` runs from the moment the
 * generation is handed to a worker (after validation and the pipeline check) to its end, `ttftMs`
 * (streamed only) from the same moment to the first token.
 */
export const GenerationFactsSchema = z.object({
  endpoint: z.enum(["chat.completions", "completions", "deployment"]),
  /** `team-slug/deployment-name`. */
  deployment: z.string(),
  deploymentId: z.string(),
  model: z.string(),
  /** The choice this sample holds, of `n`. */
  index: z.number().int().min(0),
  n: z.number().int().min(1),
  finishReason: z.enum(["stop", "length"]),
  stop: z.string().nullable(),
  promptTokens: z.number().int().min(0),
  completionTokens: z.number().int().min(0),
  latencyMs: z.number().min(0),
  ttftMs: z.number().min(0).optional(),
  streamed: z.boolean(),
  requestId: z.string(),
  /** The API or model key the completion was asked with (absent: the dashboard's playground). */
  keyId: z.string().optional(),
});
export type GenerationFacts = z.infer<typeof GenerationFactsSchema>;

/** A sample as the dashboard's table and preview get it: the API's fields and, captured, its facts. */
export type PreviewSample = SampleDto & { generation?: GenerationFacts | null };

/** PATCH /v1/samples/:id: labels merged into the sample's metadata (same limits as `add`). */
export const PatchSampleBody = z.strictObject({ metadata: MetadataSchema });
export type PatchSampleInput = z.infer<typeof PatchSampleBody>;

/** The header form, for the API reference (captureFromHeaders reads and checks them). */
export const CaptureHeaders = z.object({
  [CAPTURE_HEADERS.id]: z
    .string()
    .optional()
    .meta({ description: "Capture: the pipeline the finished choices are stored in (docs/api.md, Capture)" }),
  [CAPTURE_HEADERS.userId]: z.string().optional().meta({ description: "Capture: the samples' userId" }),
  [CAPTURE_HEADERS.groupId]: z.string().optional().meta({ description: "Capture: the samples' groupId" }),
  [CAPTURE_HEADERS.metadata]: z
    .string()
    .optional()
    .meta({ description: "Capture: the samples' metadata, a JSON object of strings" }),
});
