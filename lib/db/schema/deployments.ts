import { boolean, pgTable, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";
import { DTYPE_CHOICES } from "../../contracts/models";
import { UPSTREAM_KINDS } from "../../contracts/upstream";
import { teams } from "./teams";

export const deployments = pgTable(
  "deployments",
  {
    id: text("id").primaryKey(),
    teamId: text("team_id")
      .notNull()
      .references(() => teams.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    /** A local ONNX model folder or a hub id. */
    model: text("model").notNull(),
    /** Which of the model's ONNX files (lib/contracts/models.ts); `auto`: the engine chooses. */
    dtype: text("dtype", { enum: DTYPE_CHOICES }).notNull().default("auto"),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    /**
     * Upstream deployments (lib/inference/backends): the OpenAI-compatible servers that answer in
     * place of the workers, their dialect, the model name they serve, and the bearer key they
     * take (AES-256-GCM, lib/secret-box.ts; never returned). Null on local deployments.
     */
    upstreamKind: text("upstream_kind", { enum: UPSTREAM_KINDS }),
    upstreamUrls: text("upstream_urls").array(),
    upstreamModel: text("upstream_model"),
    upstreamKey: text("upstream_key"),
    /**
     * The upstream hosts are checked at every connection (lib/net/upstream-hosts.ts): the
     * deployment was made by a team's owner (the dashboard), not by the operator (the CLI).
     */
    upstreamHostsChecked: boolean("upstream_hosts_checked").notNull().default(false),
  },
  // Deployment URLs are /deployments/{team-slug}/{name}: the name is unique in its team.
  (t) => [uniqueIndex("deployments_team_name_idx").on(t.teamId, t.name)],
);

export type Deployment = typeof deployments.$inferSelect;
