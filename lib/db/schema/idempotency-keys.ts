import { index, integer, pgTable, primaryKey, text, timestamp } from "drizzle-orm/pg-core";
import { teams } from "./teams";

/**
 * `Idempotency-Key`s of the write endpoints (lib/services/idempotency.ts), per team. A request
 * reserves its key by inserting the row first (the primary key makes concurrent duplicates
 * collide); the first one runs and stores its response here, the others return it. Rows older
 * than 24 hours no longer count and are removed by the workers' maintenance.
 */
export const idempotencyKeys = pgTable(
  "idempotency_keys",
  {
    teamId: text("team_id")
      .notNull()
      .references(() => teams.id, { onDelete: "cascade" }),
    key: text("key").notNull(),
    /** SHA-256 of the method, the path and the JSON body (keys sorted). */
    requestHash: text("request_hash").notNull(),
    /** The stored response's status; null while the first request runs. */
    status: integer("status"),
    /** The stored response's JSON body. */
    response: text("response"),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.teamId, t.key] }),
    // The maintenance's sweep of expired keys.
    index("idempotency_keys_created_idx").on(t.createdAt),
  ],
);

export type IdempotencyKey = typeof idempotencyKeys.$inferSelect;
