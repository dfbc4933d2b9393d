import { z } from "zod";
import {
  checkOptionRules,
  DatasetFileSchema,
  DatasetOptionsShape,
  DatasetStatsSchema,
  withDefaults,
  type DatasetOptions,
} from "./dataset-options";
import { SelectionFilterShape, type Selection } from "./pipelines";

/**
 * The datasets half of the hosted API (create-dataset, list, get, download, delete), shared by
 * the route handlers and the tests. Rules the spec leaves open are documented in docs/api.md.
 */
export const DATASET_NAME_RULE = /^[a-z0-9][a-z0-9._-]{0,99}$/;

export const DatasetName = z
  .string()
  .regex(
    DATASET_NAME_RULE,
    "must be 1-100 characters: lower-case letters, digits, '.', '_' or '-', starting with a letter or digit",
  );

const FilterBody = z.strictObject(SelectionFilterShape);

/**
 * `name`, the selection filters (at the top level or nested under `filter`, not both: a filter
 * split across the two places would be ambiguous) and the packaging options (top level only).
 * Parsed into one Selection and the options with their defaults.
 */
export const CreateDatasetBody = z
  .strictObject({ name: DatasetName, ...SelectionFilterShape, ...DatasetOptionsShape, filter: FilterBody.nullish() })
  .superRefine((b, ctx) => {
    checkOptionRules(b, ctx);
    if (!b.filter) return;
    const topLevel = Object.keys(SelectionFilterShape).filter(
      (k) => b[k as keyof typeof SelectionFilterShape] !== undefined,
    );
    if (topLevel.length > 0) {
      ctx.addIssue({
        code: "custom",
        path: [topLevel[0]!],
        message: "give the filters either at the top level or under 'filter', not both",
      });
    }
  })
  .transform((b): { name: string; selection: Partial<Selection>; options: DatasetOptions } => {
    const top = Object.fromEntries(
      Object.keys(SelectionFilterShape).map((k) => [k, b[k as keyof typeof SelectionFilterShape]]),
    );
    return { name: b.name, selection: stripUndefined(b.filter ?? (top as Selection)), options: withDefaults(b) };
  });

/** Only the filters given: the dataset's `filter` echoes them without `undefined` keys. */
function stripUndefined(s: Selection): Partial<Selection> {
  return Object.fromEntries(Object.entries(s).filter(([, v]) => v !== undefined));
}

export const DATASET_STATUSES = ["PROCESSING", "READY", "FAILED"] as const;

export const DatasetSchema = z.object({
  id: z.string().startsWith("data_"),
  name: z.string(),
  teamId: z.string(),
  datasetString: z.string(),
  size: z.number().int().min(0),
  status: z.enum(DATASET_STATUSES),
  createdAt: z.iso.datetime(),
  deletedAt: z.iso.datetime().nullable(),
  // Beyond the spec's fields (docs/api.md):
  pipelineId: z.string(),
  filter: z.record(z.string(), z.unknown()),
  progress: z.number().int().min(0),
  bytes: z.number().int().min(0).nullable(),
  checksum: z.string().nullable(),
  error: z.string().nullable(),
  /** A sample of its selection was deleted after it was packaged: the file may hold it. */
  containsDeletedSamples: z.boolean(),
  options: z.strictObject({
    format: z.enum(["jsonl", "parquet"]),
    compression: z.enum(["none", "gzip"]),
    dedupe: z.boolean(),
    split: z
      .strictObject({
        validation: z.number(),
        seed: z.number().int(),
        by: z.enum(["sample", "group", "user"]).optional(),
      })
      .optional(),
    validate: z.enum(["openai-chat"]).optional(),
    tokenizer: z.string().optional(),
    maxTokens: z.number().int().optional(),
  }),
  /** Once READY; null before. */
  stats: DatasetStatsSchema.nullable(),
  /** The files of a READY dataset (two with `split`); empty before. */
  files: z.array(DatasetFileSchema),
});
export type DatasetDto = z.infer<typeof DatasetSchema>;

export const DownloadResponse = z.object({ url: z.url(), expiresAt: z.iso.datetime() });

/** `GET /v1/datasets/:id/download?split=train|validation`: which file of a split dataset. */
export const DownloadQuery = z.strictObject({ split: z.enum(["train", "validation"]).optional() });
export type DownloadDto = z.infer<typeof DownloadResponse>;
