import { jsonb, pgTable, text, timestamp, integer } from "drizzle-orm/pg-core";

/** The inference registry: each worker process advertises itself here with a heartbeat. */
export const workers = pgTable("workers", {
  id: text("id").primaryKey(),
  hostname: text("hostname").notNull(),
  pid: integer("pid").notNull(),
  /** Base URL of the worker's internal inference server, once it listens. */
  address: text("address"),
  /** Models loaded or servable by this worker. */
  models: jsonb("models").$type<string[]>().notNull().default([]),
  startedAt: timestamp("started_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  heartbeatAt: timestamp("heartbeat_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
});

export type WorkerRow = typeof workers.$inferSelect;
