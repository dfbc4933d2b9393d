import { sql, type SQL } from "drizzle-orm";
import {
  bigint,
  boolean,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  smallint,
  text,
  timestamp,
  type AnyPgColumn,
} from "drizzle-orm/pg-core";
import { teams } from "./teams";

import type { SampleMessage, ToolDefinition } from "../../contracts/messages";
import type { GenerationFacts } from "../../contracts/capture";

/** A stored message: the chat shapes of lib/contracts/messages.ts (tool calls included). */
export type ChatMessage = SampleMessage;

export const pipelines = pgTable(
  "pipelines",
  {
    id: text("id").primaryKey(),
    teamId: text("team_id")
      .notNull()
      .references(() => teams.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    /** Samples older than this many days are deleted by the workers' retention job; null keeps them. */
    retentionDays: integer("retention_days"),
    /**
     * Set by DELETE /v1/pipelines/:id: from then on the pipeline and its samples are not found;
     * a worker removes its samples in batches and then the row (see lib/services/purge.ts).
     */
    deletedAt: timestamp("deleted_at", { withTimezone: true, mode: "date" }),
  },
  (t) => [
    // GET /v1/pipelines/list: a team's pipelines, newest first.
    index("pipelines_team_created_idx").on(t.teamId, t.createdAt),
    // The workers' maintenance: pipelines with a retention period, and deleted ones to purge.
    index("pipelines_retention_idx")
      .on(t.id)
      .where(sql`${t.retentionDays} is not null or ${t.deletedAt} is not null`),
  ],
);

/**
 * The text a selection's `search` looks in: the contents of every message, as one JSON array.
 * Queries must write the very same expression for the trigram index below to serve them.
 */
export const sampleSearchText = (messages: AnyPgColumn | SQL) =>
  sql`(jsonb_path_query_array(${messages}, '$[*].content'::jsonpath)::text)`;

export const samples = pgTable(
  "samples",
  {
    id: text("id").primaryKey(),
    pipelineId: text("pipeline_id")
      .notNull()
      .references(() => pipelines.id, { onDelete: "cascade" }),
    teamId: text("team_id").notNull(),
    messages: jsonb("messages").$type<ChatMessage[]>().notNull(),
    /** Number of messages, kept so listing never has to read the messages. */
    length: integer("length").notNull(),
    userId: text("user_id"),
    groupId: text("group_id"),
    metadata: jsonb("metadata").$type<Record<string, string>>(),
    /**
     * A captured completion's generation facts (deployment, model, finish reason, tokens,
     * latency); null for samples added otherwise. Never part of the API's sample fields.
     */
    generation: jsonb("generation").$type<GenerationFacts>(),
    /**
     * The import that stored it (`imp_…`); null for samples added or captured. A selection's
     * `importId` finds an import's samples (to delete what a cancelled or mistaken import stored).
     */
    importId: text("import_id"),
    /** The tools the conversation's model was offered (OpenAI's fine-tuning lines); null: none given. */
    tools: jsonb("tools").$type<ToolDefinition[]>(),
    /**
     * Its metadata was changed after it was stored (PATCH /v1/samples/:id): a dataset packaged
     * before may hold it under labels it no longer has (deletions mark such datasets).
     */
    relabelled: boolean("relabelled").notNull().default(false),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" })
      .notNull()
      .default(sql`clock_timestamp()`),
  },
  (t) => [
    // The order of every selection is (created_at, id): pages, counts and datasets
    // of an unfiltered pipeline walk this index.
    index("samples_pipeline_order_idx").on(t.pipelineId, t.createdAt, t.id),
    // Selections filtered by userId / groupId, already in selection order.
    index("samples_pipeline_user_idx").on(t.pipelineId, t.userId, t.createdAt, t.id),
    index("samples_pipeline_group_idx").on(t.pipelineId, t.groupId, t.createdAt, t.id),
    // `search`: a trigram index (pg_trgm) over the message contents, with the pipeline id in the
    // same GIN index (btree_gin), so a term that is common in other pipelines costs nothing here.
    index("samples_search_idx").using("gin", t.pipelineId, sql`${sampleSearchText(t.messages)} gin_trgm_ops`),
  ],
);

/**
 * One row per metadata key of a sample, written in the same statement as the sample.
 * Why not a GIN index on samples.metadata: GIN cannot answer from the index alone, so counting
 * a common label read every matching heap row (~0.5 s for 100k of 1M samples). Here the primary
 * key is in selection order within each (pipeline, key, value): a filtered page is an ordered
 * range scan, a count an index-only scan, and several keys merge-join on (created_at, sample_id).
 */
export const sampleLabels = pgTable(
  "sample_labels",
  {
    // Cascades with its pipeline, like samples. No foreign key to samples: it would need an index
    // on sample_id just for cascades. Deleting a sample deletes its labels by this primary key,
    // from the sample's own metadata and created_at (lib/services/sample-deletion.ts).
    pipelineId: text("pipeline_id")
      .notNull()
      .references(() => pipelines.id, { onDelete: "cascade" }),
    key: text("key").notNull(),
    /** COLLATE "C" (migration 0004): byte order, so a value prefix is one range of the key. */
    value: text("value").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull(),
    sampleId: text("sample_id").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.pipelineId, t.key, t.value, t.createdAt, t.sampleId] }),
    // A key whatever its value, in selection order: `$exists` pages, and the per-sample probes of
    // `$exists: false`, `$ne`, `$prefix` and `$in` when another filter drives the query.
    index("sample_labels_key_order_idx").on(t.pipelineId, t.key, t.createdAt, t.sampleId, t.value),
  ],
);

/**
 * Each pipeline's number of samples, kept by Postgres itself: statement triggers on samples
 * (drizzle/0013_pipeline_sample_counts.sql) add what each INSERT, COPY or DELETE changed (a TRUNCATE
 * empties them), in the same transaction, whoever ran it. A count of a whole pipeline then reads a few rows instead of
 * one index entry per sample (1M samples: ~100 ms), and so do `$ne` and `$exists: false`, which
 * are counted as differences from it (lib/services/selection-query.ts). A pipeline's count is
 * the sum of its rows: each connection adds to the shard of its backend (pid mod 16), so that
 * concurrent inserts into one pipeline do not queue on one row lock until they commit. Deleting
 * a pipeline deletes its rows (a trigger: no foreign key, which the cascade of the samples'
 * deletion would trip over).
 */
export const pipelineSampleCounts = pgTable(
  "pipeline_sample_counts",
  {
    pipelineId: text("pipeline_id").notNull(),
    shard: smallint("shard").notNull(),
    /** May be negative in one shard (deletions counted where they ran); the sum is the count. */
    n: bigint("n", { mode: "number" }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.pipelineId, t.shard] })],
);

export type Pipeline = typeof pipelines.$inferSelect;
export type Sample = typeof samples.$inferSelect;
