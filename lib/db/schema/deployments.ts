import { pgTable, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";
import { DTYPE_CHOICES } from "../../contracts/models";
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
  },
  // Deployment URLs are /deployments/{team-slug}/{name}: the name is unique in its team.
  (t) => [uniqueIndex("deployments_team_name_idx").on(t.teamId, t.name)],
);

export type Deployment = typeof deployments.$inferSelect;
