import { z } from "zod";
import { ErrorObjectSchema } from "./errors";
import { AddSampleBody } from "./pipelines";

/** POST /v1/pipelines/:id/add-batch: up to 1,000 add bodies, each answered on its own. */
export const MAX_BATCH_SAMPLES = 1000;

/**
 * The envelope the route validates as a whole (a 400 refuses the request); each item is then
 * checked against AddSampleBody on its own, and a refused item is one result, not a 400.
 */
export const AddBatchEnvelope = z.strictObject({
  samples: z
    .array(z.unknown())
    .min(1, "must contain at least one sample")
    .max(MAX_BATCH_SAMPLES, `at most ${MAX_BATCH_SAMPLES} samples per batch`),
});

/** The same body as the OpenAPI document describes it: each item an add body. */
export const AddBatchBody = z.strictObject({
  samples: z.array(AddSampleBody).min(1).max(MAX_BATCH_SAMPLES),
});

export const BatchItemResult = z.union([
  z.strictObject({ id: z.string() }),
  z.strictObject({ error: ErrorObjectSchema }),
]);
export type BatchItemResult = z.infer<typeof BatchItemResult>;

/** One result per sample, in request order. */
export const AddBatchResponse = z.object({ results: z.array(BatchItemResult) });
