import { index, pgTable, text, timestamp } from "drizzle-orm/pg-core";
import { deployments } from "./deployments";
import { teams, users } from "./teams";

export const apiKeys = pgTable(
  "api_keys",
  {
    id: text("id").primaryKey(),
    teamId: text("team_id")
      .notNull()
      .references(() => teams.id, { onDelete: "cascade" }),
    /** `api` keys call the hosted API (/v1); `model` keys call deployments. Never interchangeable. */
    kind: text("kind", { enum: ["api", "model"] }).notNull(),
    /** Only for model keys: restricts the key to one deployment. */
    deploymentId: text("deployment_id").references(() => deployments.id, { onDelete: "cascade" }),
    /**
     * Only for model keys: the pipelines the key may capture completions into (docs/api.md,
     * "Capture"). Null: any pipeline of the team; empty: none.
     */
    capturePipelines: text("capture_pipelines").array(),
    name: text("name"),
    /** The first characters of the secret, shown in lists so a person can tell keys apart. */
    prefix: text("prefix").notNull(),
    /** SHA-256 (hex) of the whole secret; the secret itself is never stored. */
    hash: text("hash").notNull().unique(),
    /** The member who made it on the dashboard (null: the CLI, or a user since deleted). */
    createdBy: text("created_by").references(() => users.id, { onDelete: "set null" }),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    lastUsedAt: timestamp("last_used_at", { withTimezone: true, mode: "date" }),
    revokedAt: timestamp("revoked_at", { withTimezone: true, mode: "date" }),
  },
  // key:list and the settings page list a team's keys.
  (t) => [index("api_keys_team_idx").on(t.teamId, t.createdAt)],
);

export type ApiKey = typeof apiKeys.$inferSelect;
