import { z } from "zod";
import { DeploymentName } from "./deployments";

/**
 * How a dataset is packaged, beside its name and filters (docs/api.md, "Dataset options"). Every
 * option is optional; `null` means "not given". Stored on the dataset as given, defaults filled.
 */
export const DATASET_FORMATS = ["jsonl", "parquet"] as const;
export const DATASET_COMPRESSIONS = ["none", "gzip"] as const;
export const VALIDATORS = ["openai-chat"] as const;
export const SPLITS = ["train", "validation"] as const;
export type SplitName = (typeof SPLITS)[number];

/** Why `validate: "openai-chat"` leaves a sample out; a sample counts under the first that applies. */
export const INVALID_REASONS = ["unknown_role", "empty_content", "system_not_first", "no_assistant_message"] as const;
export type InvalidReason = (typeof INVALID_REASONS)[number];

const nullable = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v) => v ?? undefined);

export const SplitSpec = z.strictObject({
  validation: z
    .number()
    .gt(0, "must be greater than 0 and less than 1")
    .lt(1, "must be greater than 0 and less than 1"),
  seed: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  /**
   * What goes to one side together: each `sample` (default); each `group`: samples with the same
   * groupId (a conversation's turns), and without one the choices of one captured request (n > 1);
   * or each `user`: samples with the same userId (without one, each sample alone).
   */
  by: z.enum(["sample", "group", "user"]).optional(),
});

export const DatasetOptionsShape = {
  format: nullable(z.enum(DATASET_FORMATS)),
  compression: nullable(z.enum(DATASET_COMPRESSIONS)),
  split: nullable(SplitSpec),
  dedupe: nullable(z.boolean()),
  validate: nullable(z.enum(VALIDATORS)),
  /** A deployment of the caller's team, by name: its tokenizer and chat template count tokens. */
  tokenizer: nullable(DeploymentName),
  maxTokens: nullable(z.number().int().min(1).max(10_000_000)),
};

/** The options with their defaults; `split`, `validate`, `tokenizer` and `maxTokens` absent when not asked. */
export type DatasetOptions = {
  format: (typeof DATASET_FORMATS)[number];
  compression: (typeof DATASET_COMPRESSIONS)[number];
  dedupe: boolean;
  split?: z.infer<typeof SplitSpec>;
  validate?: (typeof VALIDATORS)[number];
  tokenizer?: string;
  maxTokens?: number;
};

type GivenOptions = { [K in keyof typeof DatasetOptionsShape]: z.infer<(typeof DatasetOptionsShape)[K]> };

/** The rules between options (each a 400 naming the option). */
export function checkOptionRules(o: GivenOptions, ctx: z.RefinementCtx): void {
  if (o.compression === "gzip" && o.format === "parquet") {
    ctx.addIssue({
      code: "custom",
      path: ["compression"],
      message: "gzip applies to jsonl; Parquet files compress their own pages (Snappy)",
    });
  }
  if (o.maxTokens !== undefined && o.tokenizer === undefined) {
    ctx.addIssue({
      code: "custom",
      path: ["maxTokens"],
      message: "needs 'tokenizer' (a deployment to count tokens with)",
    });
  }
}

export function withDefaults(o: GivenOptions): DatasetOptions {
  return {
    format: o.format ?? "jsonl",
    compression: o.compression ?? "none",
    dedupe: o.dedupe ?? false,
    ...(o.split ? { split: o.split } : {}),
    ...(o.validate ? { validate: o.validate } : {}),
    ...(o.tokenizer ? { tokenizer: o.tokenizer } : {}),
    ...(o.maxTokens !== undefined ? { maxTokens: o.maxTokens } : {}),
  };
}

/** What packaging found (docs/api.md, "Dataset stats"); fields of options not asked are absent. */
export const DatasetStatsSchema = z.strictObject({
  included: z.number().int().min(0),
  skipped: z
    .strictObject({
      invalid: z.partialRecord(z.enum(INVALID_REASONS), z.number().int().min(0)).optional(),
      duplicate: z.number().int().min(0).optional(),
      tooLong: z.number().int().min(0).optional(),
      /** With `tokenizer`: samples the model's chat template refuses (only when there are some). */
      template: z.number().int().min(1).optional(),
    })
    .optional(),
  splits: z.strictObject({ train: z.number().int().min(0), validation: z.number().int().min(0) }).optional(),
  tokens: z
    .strictObject({
      total: z.number().int().min(0),
      p50: z.number().int().min(0),
      p95: z.number().int().min(0),
      max: z.number().int().min(0),
      /** Included samples by token count: `counts[i]` have [i × binWidth, (i + 1) × binWidth) tokens. */
      histogram: z.strictObject({ binWidth: z.number().int().min(1), counts: z.array(z.number().int().min(0)) }),
    })
    .optional(),
});
export type DatasetStats = z.infer<typeof DatasetStatsSchema>;

/** One file of a READY dataset. */
export const DatasetFileSchema = z.strictObject({
  split: z.enum(SPLITS).nullable(),
  name: z.string(),
  samples: z.number().int().min(0),
  bytes: z.number().int().min(0),
  checksum: z.string(),
});
export type DatasetFile = z.infer<typeof DatasetFileSchema>;
