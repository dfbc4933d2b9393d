import { sql } from "drizzle-orm";
import { index, integer, jsonb, pgTable, primaryKey, text, timestamp } from "drizzle-orm/pg-core";
import { teams } from "./teams";

export type ChatMessage = { role: "system" | "user" | "assistant"; content: string };

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
  },
  // GET /v1/pipelines/list: a team's pipelines, newest first.
  (t) => [index("pipelines_team_created_idx").on(t.teamId, t.createdAt)],
);

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
    // Cascades with its pipeline, like samples. (Samples are never deleted one by one, so no
    // foreign key to samples: it would need an index on sample_id just for cascades.)
    pipelineId: text("pipeline_id")
      .notNull()
      .references(() => pipelines.id, { onDelete: "cascade" }),
    key: text("key").notNull(),
    value: text("value").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull(),
    sampleId: text("sample_id").notNull(),
  },
  (t) => [primaryKey({ columns: [t.pipelineId, t.key, t.value, t.createdAt, t.sampleId] })],
);

export type Pipeline = typeof pipelines.$inferSelect;
export type Sample = typeof samples.$inferSelect;
