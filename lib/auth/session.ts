import { eq } from "drizzle-orm";
import { getServerSession } from "next-auth";
import { cookies, headers } from "next/headers";
import { redirect } from "next/navigation";
import type { DbOrTx } from "../db/client";
import { getDb } from "../db/client";
import { users, type Team } from "../db/schema";
import { env } from "../env";
import { listTeamsOfUser } from "../services/teams";
import { safeCallback } from "../ui/safe-callback";
import { authOptions } from "./next-auth-options";
import { REQUEST_PATH_HEADER } from "./request-path";

/** Names the team a signed-in user is working in; always checked against their memberships. */
export const TEAM_COOKIE = "lmp_team";

export type SessionUser = { id: string; email: string; name: string | null };
export type TeamOfUser = Team & { role: string };
export type TeamContext = { user: SessionUser; team: TeamOfUser; teams: TeamOfUser[] };

/** Makes `teamId` the current team of this browser (checked against memberships at every use). */
export async function setCurrentTeam(teamId: string): Promise<void> {
  (await cookies()).set(TEAM_COOKIE, teamId, {
    httpOnly: true,
    sameSite: "lax",
    secure: env().PUBLIC_URL.startsWith("https:"),
    path: "/",
    maxAge: 365 * 24 * 3600,
  });
}

/**
 * The signed-in user of this request (server components and route handlers), or null: also null
 * when the session was signed before the user's password was last set (its session version is
 * older than the user's), or the user is gone. A stolen cookie, or one a former password opened,
 * stops working at once, not after its 30 days.
 */
export async function getSessionUser(): Promise<SessionUser | null> {
  const session = await getServerSession(authOptions());
  const user = session?.user as { id?: string; email?: string | null; name?: string | null; sv?: number } | undefined;
  if (!user?.id || !user.email) return null;
  const [row] = await getDb()
    .db.select({ sessionVersion: users.sessionVersion })
    .from(users)
    .where(eq(users.id, user.id));
  // Sessions signed before versions existed carry none: version 0.
  if (!row || row.sessionVersion !== (user.sv ?? 0)) return null;
  return { id: user.id, email: user.email, name: user.name ?? null };
}

/**
 * The team the cookie names when the user is a member of it, else their first team.
 * A cookie naming a team the user does not belong to (any more) is simply ignored.
 */
export function pickTeam<T extends { id: string }>(teams: T[], selectedId: string | undefined): T | undefined {
  return teams.find((t) => t.id === selectedId) ?? teams[0];
}

/** The user's teams and current team; null when the user has none (or no longer exists). */
export async function resolveTeamContext(
  db: DbOrTx,
  user: SessionUser,
  selectedTeamId: string | undefined,
): Promise<TeamContext | null> {
  const teams = await listTeamsOfUser(db, user.id);
  const team = pickTeam(teams, selectedTeamId);
  return team ? { user, team, teams } : null;
}

/** The current request's team context, or null without a session or a team. */
export async function currentTeamContext(): Promise<TeamContext | null> {
  const user = await getSessionUser();
  if (!user) return null;
  const selected = (await cookies()).get(TEAM_COOKIE)?.value;
  return resolveTeamContext(getDb().db, user, selected);
}

/**
 * For dashboard pages: the team context, or a redirect to sign-in that comes back to `returnTo`
 * (by default the page this request asked for, as proxy.ts names it: the layout's case).
 * Every page calls it (not only the layout): layouts are not re-run on client navigation.
 */
export async function requireTeamContext(returnTo?: string): Promise<TeamContext> {
  const user = await getSessionUser();
  if (!user) {
    const back = safeCallback(returnTo ?? (await headers()).get(REQUEST_PATH_HEADER));
    redirect(`/sign-in?callbackUrl=${encodeURIComponent(back)}`);
  }
  const selected = (await cookies()).get(TEAM_COOKIE)?.value;
  const ctx = await resolveTeamContext(getDb().db, user, selected);
  // Signed in, but in no team (left it, or removed): sign-in would send them straight back.
  if (!ctx) redirect("/no-team");
  return ctx;
}
