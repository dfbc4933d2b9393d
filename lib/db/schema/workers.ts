import { jsonb, pgTable, text, timestamp, integer } from "drizzle-orm/pg-core";
import type { ModelState } from "../../contracts/models";

/** The inference registry: each worker process advertises itself here with a heartbeat. */
export const workers = pgTable("workers", {
  id: text("id").primaryKey(),
  hostname: text("hostname").notNull(),
  pid: integer("pid").notNull(),
  /** Base URL of the worker's internal inference server, once it listens. */
  address: text("address"),
  /**
   * The models this worker serves now, as servedModelKey(model, dtype), or teamModelKey(…, teamId)
   * for each team it serves a model for when its WORKER_SERVES places teams (lib/contracts/models.ts).
   */
  models: jsonb("models").$type<string[]>().notNull().default([]),
  /** Each served model's state (downloading with bytes, loading, ready, failed with the reason, excluded), by the same keys. */
  modelStates: jsonb("model_states").$type<Record<string, ModelState>>().notNull().default({}),
  startedAt: timestamp("started_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  heartbeatAt: timestamp("heartbeat_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
});

export type WorkerRow = typeof workers.$inferSelect;
