import { index, integer, jsonb, pgTable, primaryKey, text, timestamp } from "drizzle-orm/pg-core";
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
  /**
   * Carried in the session's JWT: a session signed with an older one is signed out. Raised when
   * the password is set (user:set-password), which ends every session the old password opened.
   */
  sessionVersion: integer("session_version").notNull().default(0),
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

/**
 * Links an owner made to let someone join the team. Only the SHA-256 of the link's token is
 * stored; the link works once (the row is deleted when it is used or revoked) until `expiresAt`.
 */
export const teamInvites = pgTable(
  "team_invites",
  {
    id: text("id").primaryKey(),
    teamId: text("team_id")
      .notNull()
      .references(() => teams.id, { onDelete: "cascade" }),
    role: text("role", { enum: ["owner", "member"] })
      .notNull()
      .default("member"),
    tokenHash: text("token_hash").notNull().unique(),
    createdBy: text("created_by").references(() => users.id, { onDelete: "set null" }),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    expiresAt: timestamp("expires_at", { withTimezone: true, mode: "date" }).notNull(),
  },
  (t) => [index("team_invites_team_idx").on(t.teamId, t.createdAt)],
);

export type TeamInvite = typeof teamInvites.$inferSelect;
