import { index, jsonb, pgTable, primaryKey, text, timestamp } from "drizzle-orm/pg-core";
import type { TeamLimitOverrides } from "../../contracts/limits";

export const teams = pgTable("teams", {
  id: text("id").primaryKey(),
  /** Short unique handle; the team part of dataset strings and deployment URLs. */
  slug: text("slug").notNull().unique(),
  name: text("name").notNull(),
  createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  /** Per-team overrides of the default rate limits and quotas (null: the defaults). */
  limits: jsonb("limits").$type<TeamLimitOverrides>(),
});

export const users = pgTable("users", {
  id: text("id").primaryKey(),
  /** Stored lower-cased; unique. */
  email: text("email").notNull().unique(),
  name: text("name"),
  /** scrypt$N$r$p$salt$hash (see lib/auth/password.ts). */
  passwordHash: text("password_hash").notNull(),
  createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
});

export const memberships = pgTable(
  "memberships",
  {
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    teamId: text("team_id")
      .notNull()
      .references(() => teams.id, { onDelete: "cascade" }),
    role: text("role", { enum: ["owner", "member"] })
      .notNull()
      .default("member"),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.userId, t.teamId] }),
    // "which members does this team have" (the PK serves the user → teams direction).
    index("memberships_team_idx").on(t.teamId),
  ],
);

export type Team = typeof teams.$inferSelect;
export type User = typeof users.$inferSelect;
export type Membership = typeof memberships.$inferSelect;
