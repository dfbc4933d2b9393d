import { eq } from "drizzle-orm";
import { z } from "zod";
import type { DbOrTx } from "../db/client";
import { memberships, teams, type Team } from "../db/schema";
import { conflict, fromZodError, notFound } from "../errors";
import { TeamLimitOverrides } from "../contracts/limits";
import { newId } from "../ids";

/** Slugs appear in URLs and dataset strings: lower-case letters, digits and inner hyphens. */
export const TeamSlug = z
  .string()
  .regex(/^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$/, "must be 1-40 lower-case letters, digits or inner hyphens");

export async function createTeam(db: DbOrTx, input: { slug: string; name?: string }): Promise<Team> {
  const slug = TeamSlug.safeParse(input.slug);
  if (!slug.success) throw fromZodError(slug.error, "slug");
  const [row] = await db
    .insert(teams)
    .values({ id: newId("team"), slug: slug.data, name: input.name?.trim() || slug.data })
    .onConflictDoNothing({ target: teams.slug })
    .returning();
  if (!row) throw conflict(`A team with slug '${slug.data}' already exists.`, "slug");
  return row;
}

export async function getTeamBySlug(db: DbOrTx, slug: string): Promise<Team> {
  const [row] = await db.select().from(teams).where(eq(teams.slug, slug));
  if (!row) throw notFound(`No team with slug '${slug}'.`, "slug");
  return row;
}

export async function listTeamsOfUser(db: DbOrTx, userId: string): Promise<(Team & { role: string })[]> {
  const rows = await db
    .select({ team: teams, role: memberships.role })
    .from(memberships)
    .innerJoin(teams, eq(teams.id, memberships.teamId))
    .where(eq(memberships.userId, userId))
    .orderBy(teams.createdAt);
  return rows.map((r) => ({ ...r.team, role: r.role }));
}

/**
 * Sets a team's limit overrides: the given fields replace its current ones (null: back to the
 * default); `reset` drops every override. Returns the team with its new overrides.
 */
export async function setTeamLimits(
  db: DbOrTx,
  input: { teamId: string; limits: { [K in keyof TeamLimitOverrides]?: number | null }; reset?: boolean },
): Promise<Team> {
  const [current] = await db.select({ limits: teams.limits }).from(teams).where(eq(teams.id, input.teamId));
  if (!current) throw notFound(`No team with id '${input.teamId}'.`, "team");
  const merged: Record<string, number> = input.reset ? {} : { ...(current.limits ?? {}) };
  for (const [k, v] of Object.entries(input.limits)) {
    if (v === null) delete merged[k];
    else if (v !== undefined) merged[k] = v;
  }
  const parsed = TeamLimitOverrides.safeParse(merged);
  if (!parsed.success) throw fromZodError(parsed.error, "limits");
  const limits = Object.keys(parsed.data).length > 0 ? parsed.data : null;
  const [row] = await db.update(teams).set({ limits }).where(eq(teams.id, input.teamId)).returning();
  return row!;
}
