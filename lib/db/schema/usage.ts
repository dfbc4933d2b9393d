import { bigint, date, doublePrecision, integer, pgTable, primaryKey, text } from "drizzle-orm/pg-core";

/**
 * Completions counted per day, team, key and deployment (written in batches off the request
 * path; lib/services/usage.ts). `key_id` is '' for completions made without a key (the
 * playground). TTFT: the streamed completions' times to first token, as a count, a sum and a
 * histogram over USAGE_TTFT_BOUNDS_MS (the dashboard's percentiles come from it).
 */
export const usageDaily = pgTable(
  "usage_daily",
  {
    day: date("day", { mode: "string" }).notNull(),
    teamId: text("team_id").notNull(),
    keyId: text("key_id").notNull(),
    deploymentId: text("deployment_id").notNull(),
    requests: integer("requests").notNull().default(0),
    promptTokens: bigint("prompt_tokens", { mode: "number" }).notNull().default(0),
    completionTokens: bigint("completion_tokens", { mode: "number" }).notNull().default(0),
    ttftCount: integer("ttft_count").notNull().default(0),
    ttftSumMs: doublePrecision("ttft_sum_ms").notNull().default(0),
    ttftHistogram: integer("ttft_histogram").array().notNull(),
  },
  // GET /v1/usage reads one team's rows over a range of days (the primary key serves it).
  (t) => [primaryKey({ columns: [t.teamId, t.day, t.keyId, t.deploymentId] })],
);

export type UsageDaily = typeof usageDaily.$inferSelect;
