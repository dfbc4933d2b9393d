import { z } from "zod";
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
 * `name` plus the selection filters, given at the top level or nested under `filter` (not
 * both: a filter split across the two places would be ambiguous). Parsed into one Selection.
 */
export const CreateDatasetBody = z
  .strictObject({ name: DatasetName, ...SelectionFilterShape, filter: FilterBody.nullish() })
  .superRefine((b, ctx) => {
    if (!b.filter) return;
    const topLevel = Object.keys(SelectionFilterShape).filter((k) => b[k as keyof Selection] !== undefined);
    if (topLevel.length > 0) {
      ctx.addIssue({
        code: "custom",
        path: [topLevel[0]!],
        message: "give the filters either at the top level or under 'filter', not both",
      });
    }
  })
  .transform(({ name, filter, ...top }): { name: string; selection: Partial<Selection> } => ({
    name,
    selection: stripUndefined(filter ?? top),
  }));

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
});
export type DatasetDto = z.infer<typeof DatasetSchema>;

export const DownloadResponse = z.object({ url: z.url(), expiresAt: z.iso.datetime() });
export type DownloadDto = z.infer<typeof DownloadResponse>;
