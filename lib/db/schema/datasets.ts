import { sql } from "drizzle-orm";
import { bigint, boolean, index, integer, jsonb, pgTable, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";
import type { DatasetFile, DatasetOptions, DatasetStats } from "../../contracts/dataset-options";
import { teams } from "./teams";

export type DatasetStatus = "PROCESSING" | "READY" | "FAILED";

export const datasets = pgTable(
  "datasets",
  {
    id: text("id").primaryKey(),
    teamId: text("team_id")
      .notNull()
      .references(() => teams.id, { onDelete: "cascade" }),
    /**
     * The pipeline it was made from. No foreign key: a dataset outlives its pipeline (deleting a
     * pipeline leaves its datasets, which then say `containsDeletedSamples`).
     */
    pipelineId: text("pipeline_id").notNull(),
    name: text("name").notNull(),
    status: text("status", { enum: ["PROCESSING", "READY", "FAILED"] })
      .notNull()
      .default("PROCESSING"),
    /** The selection's filters, as given. */
    filter: jsonb("filter").$type<Record<string, unknown>>().notNull(),
    /** How it is packaged (format, compression, split, dedupe, validate, tokenizer, maxTokens). */
    options: jsonb("options")
      .$type<DatasetOptions>()
      .notNull()
      .default(sql`'{"format":"jsonl","compression":"none","dedupe":false}'::jsonb`),
    /**
     * The model of the `tokenizer` deployment, read at creation: packaging counts with it even if
     * the deployment changes or goes before a worker gets to the dataset.
     */
    tokenizerModel: text("tokenizer_model"),
    /** Samples selected at creation; once READY, the samples written (options may leave some out). */
    size: integer("size").notNull(),
    /**
     * The frozen selection's upper bound: the newest sample of the pipeline, in selection
     * order (created_at, id), when the dataset was created. The packager reads only samples at
     * or before it, so samples added later never appear. Null: the pipeline was empty.
     * Kept at microsecond precision (mode "string"): a JS Date would round it.
     */
    untilCreatedAt: timestamp("until_created_at", { withTimezone: true, mode: "string", precision: 6 }),
    untilSampleId: text("until_sample_id"),
    /** Samples written so far by the packager. */
    progress: integer("progress").notNull().default(0),
    /** The first file's key (the only one without `split`); every file is in `files`. */
    blobKey: text("blob_key"),
    files: jsonb("files").$type<(DatasetFile & { key: string })[]>().notNull().default([]),
    /** What packaging counted; set with READY. */
    stats: jsonb("stats").$type<DatasetStats>(),
    bytes: bigint("bytes", { mode: "number" }),
    checksum: text("checksum"),
    error: text("error"),
    /**
     * A sample of the dataset's selection (by its filters, at or before its bound) was deleted
     * after the dataset was packaged: the file may hold it. See lib/services/sample-deletion.ts.
     */
    containsDeletedSamples: boolean("contains_deleted_samples").notNull().default(false),
    leaseOwner: text("lease_owner"),
    leaseExpiresAt: timestamp("lease_expires_at", { withTimezone: true, mode: "date" }),
    attempts: integer("attempts").notNull().default(0),
    /**
     * Times its packaging started over because a sample it may hold was deleted (at most
     * DELETION_RESTARTS; after that it goes on and is marked containsDeletedSamples).
     */
    restarts: integer("restarts").notNull().default(0),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    deletedAt: timestamp("deleted_at", { withTimezone: true, mode: "date" }),
  },
  (t) => [
    // Names are unique per team among datasets that are not deleted.
    uniqueIndex("datasets_team_name_idx")
      .on(t.teamId, t.name)
      .where(sql`${t.deletedAt} is null`),
    index("datasets_team_created_idx").on(t.teamId, t.createdAt),
    // The packager's claim query: PROCESSING rows whose lease is free or expired.
    index("datasets_processing_idx")
      .on(t.leaseExpiresAt)
      .where(sql`${t.status} = 'PROCESSING'`),
  ],
);

export type Dataset = typeof datasets.$inferSelect;

/** When a dataset of each team was last claimed for packaging: between equals, teams take turns. */
export const datasetTurns = pgTable("dataset_turns", {
  teamId: text("team_id")
    .primaryKey()
    .references(() => teams.id, { onDelete: "cascade" }),
  turnAt: timestamp("turn_at", { withTimezone: true, mode: "date" }).notNull(),
});
