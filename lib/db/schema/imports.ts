import { sql } from "drizzle-orm";
import { bigint, boolean, index, integer, jsonb, pgTable, text, timestamp } from "drizzle-orm/pg-core";
import type { ImportRefusal } from "../../contracts/imports";
import { pipelines } from "./pipelines";
import { teams } from "./teams";

export type ImportStatus = "PROCESSING" | "READY" | "FAILED" | "CANCELLED";

/**
 * An import of a JSONL file into a pipeline: a job row, like a dataset. The uploaded file is in the
 * blob store (`blob_key`) before the row exists; a worker claims the row with a lease and stores
 * the lines chunk by chunk. Each chunk's samples and the progress below commit in one transaction
 * (fenced by the lease), so a worker that takes over resumes at `bytes_read` and no line is ever
 * stored twice.
 */
export const imports = pgTable(
  "imports",
  {
    id: text("id").primaryKey(),
    teamId: text("team_id")
      .notNull()
      .references(() => teams.id, { onDelete: "cascade" }),
    pipelineId: text("pipeline_id")
      .notNull()
      .references(() => pipelines.id, { onDelete: "cascade" }),
    status: text("status", { enum: ["PROCESSING", "READY", "FAILED", "CANCELLED"] })
      .notNull()
      .default("PROCESSING"),
    /** The uploaded file; removed once the import is READY, FAILED or CANCELLED. */
    blobKey: text("blob_key").notNull(),
    /**
     * Whether the uploaded file has been removed (READY or FAILED): a removal that failed (the
     * object store away) is tried again by the workers' maintenance, and a deleted pipeline's row
     * is purged only once its imports' files are gone.
     */
    fileRemoved: boolean("file_removed").notNull().default(false),
    /** Size of the uploaded file. */
    bytes: bigint("bytes", { mode: "number" }).notNull(),
    /** Bytes of the file whose lines are stored (or refused): where the next chunk starts. */
    bytesRead: bigint("bytes_read", { mode: "number" }).notNull().default(0),
    linesRead: integer("lines_read").notNull().default(0),
    imported: integer("imported").notNull().default(0),
    refused: integer("refused").notNull().default(0),
    /** The first 100 refused lines with their errors. */
    refusals: jsonb("refusals").$type<ImportRefusal[]>().notNull().default([]),
    error: text("error"),
    leaseOwner: text("lease_owner"),
    leaseExpiresAt: timestamp("lease_expires_at", { withTimezone: true, mode: "date" }),
    attempts: integer("attempts").notNull().default(0),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  },
  (t) => [
    // The importer's claim query: PROCESSING rows whose lease is free or expired.
    index("imports_processing_idx")
      .on(t.leaseExpiresAt)
      .where(sql`${t.status} = 'PROCESSING'`),
    // GET /v1/imports/list: the team's imports, newest first.
    index("imports_team_order_idx").on(t.teamId, t.createdAt, t.id),
  ],
);

export type Import = typeof imports.$inferSelect;
