import { z } from "zod";
import { ErrorObjectSchema } from "./errors";

/** The first refused lines an import keeps (all of them are counted in `refused`). */
export const MAX_IMPORT_REFUSALS = 100;
/** Content types of an import's body (JSON Lines under its common names). */
export const IMPORT_CONTENT_TYPES = ["application/x-ndjson", "application/jsonl", "application/x-jsonlines"] as const;
export const IMPORT_STATUSES = ["PROCESSING", "READY", "FAILED", "CANCELLED"] as const;

/** A refused line: its number in the file (the first line is 1) and why, as an error object. */
export const ImportRefusalSchema = z.object({ line: z.number().int().min(1), error: ErrorObjectSchema });
export type ImportRefusal = z.infer<typeof ImportRefusalSchema>;

export const ImportSchema = z.object({
  id: z.string().startsWith("imp_"),
  pipelineId: z.string(),
  teamId: z.string(),
  status: z.enum(IMPORT_STATUSES),
  /** Size of the uploaded file. */
  bytes: z.number().int().min(0),
  /** Bytes of the file read so far (their lines stored or refused). */
  bytesRead: z.number().int().min(0),
  linesRead: z.number().int().min(0),
  imported: z.number().int().min(0),
  refused: z.number().int().min(0),
  refusals: z.array(ImportRefusalSchema),
  /** Why it FAILED; null otherwise. */
  error: z.string().nullable(),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
});
export type ImportDto = z.infer<typeof ImportSchema>;

/**
 * `GET /v1/imports/list`: the team's imports, newest first; `pipelineId` and `status` narrow it,
 * `before` (the last id of a page) continues after that import.
 */
export const ImportListQuery = z.strictObject({
  pipelineId: z.string().min(1).max(64).optional(),
  status: z.enum(IMPORT_STATUSES, { error: `must be one of ${IMPORT_STATUSES.join(", ")}` }).optional(),
  limit: z.coerce
    .number({ error: "must be a number" })
    .int("must be an integer")
    .min(1, "must be at least 1")
    .max(100, "must be at most 100")
    .default(20),
  before: z.string().min(1).max(64).optional(),
});
export type ImportListQuery = z.infer<typeof ImportListQuery>;
