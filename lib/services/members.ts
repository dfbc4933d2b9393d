import { createHash, randomBytes } from "node:crypto";
import { and, asc, count, eq, gt, isNull, lte, sql } from "drizzle-orm";
import type { DbOrTx } from "../db/client";
import { apiKeys, memberships, teamInvites, teams, users, type Team } from "../db/schema";
import { changeFeedOf } from "../db/change-feed";
import { rawSql } from "../db/raw";
import type { InviteDto, MemberDto, TeamRole } from "../contracts/members";
import { conflict, forbidden, notFound } from "../errors";
import { newId } from "../ids";

/** How long an invite link works. */
export const INVITE_TTL_MS = 7 * 24 * 3600_000;
/** Pending invites a team may have at once (each is a way in: owners revoke what they do not need). */
export const MAX_PENDING_INVITES = 50;

const TOKEN_PREFIX = "lmp_inv_";
const hashToken = (token: string) => createHash("sha256").update(token).digest("hex");

/** The team's members, owners first, then by when they joined. */
export async function listMembers(db: DbOrTx, teamId: string, viewerId: string): Promise<MemberDto[]> {
  const rows = await db
    .select({
      userId: users.id,
      email: users.email,
      name: users.name,
      role: memberships.role,
      joinedAt: memberships.createdAt,
      keys: sql<number>`(select count(*)::int from ${apiKeys} k
        where k.team_id = ${memberships.teamId} and k.created_by = ${memberships.userId} and k.revoked_at is null)`,
    })
    .from(memberships)
    .innerJoin(users, eq(users.id, memberships.userId))
    .where(eq(memberships.teamId, teamId))
    .orderBy(sql`${memberships.role} = 'owner' desc`, asc(memberships.createdAt), asc(users.email));
  return rows.map((r) => ({ ...r, joinedAt: r.joinedAt.toISOString(), you: r.userId === viewerId }));
}

/**
 * Runs `change` on the team's memberships with the team row locked (so that two owners demoting
 * or removing each other at once cannot leave the team without one), then refuses the change
 * if the team has no owner left. `actorId`, the member asking, must be an owner then, under the
 * lock (a request that passed its session's check just before its owner was demoted must not
 * go through), unless `selfAllowed` and they act on themselves (leaving).
 */
async function changeMembership(
  db: DbOrTx,
  input: { teamId: string; userId: string; actorId?: string; selfAllowed?: boolean },
  change: (tx: DbOrTx) => Promise<unknown>,
): Promise<void> {
  const { teamId, userId } = input;
  await db.transaction(async (tx) => {
    await lockTeamAsOwner(tx, teamId, input.selfAllowed && input.actorId === userId ? undefined : input.actorId);
    const [member] = await tx
      .select({ role: memberships.role })
      .from(memberships)
      .where(and(eq(memberships.teamId, teamId), eq(memberships.userId, userId)));
    if (!member) throw notFound(`No member with id '${userId}' in this team.`, "userId");
    await change(tx);
    const [{ owners }] = (await tx
      .select({ owners: count() })
      .from(memberships)
      .where(and(eq(memberships.teamId, teamId), eq(memberships.role, "owner")))) as [{ owners: number }];
    if (owners === 0) {
      throw conflict("A team needs at least one owner: make another member an owner first.", "userId");
    }
  });
}

/** Locks the team's row; with `ownerId`, refuses (403) unless that user is one of its owners now. */
async function lockTeamAsOwner(tx: DbOrTx, teamId: string, ownerId: string | undefined): Promise<void> {
  await tx.select({ id: teams.id }).from(teams).where(eq(teams.id, teamId)).for("update");
  if (ownerId === undefined) return;
  const [actor] = await tx
    .select({ role: memberships.role })
    .from(memberships)
    .where(and(eq(memberships.teamId, teamId), eq(memberships.userId, ownerId)));
  if (actor?.role !== "owner") throw forbidden("Only owners of the team can do this.");
}

/** Revokes the team's keys `userId` made (`kind`: only those), in `tx`; returns how many. */
async function revokeKeysOf(tx: DbOrTx, teamId: string, userId: string, kind?: "api"): Promise<number> {
  const revoked = await tx
    .update(apiKeys)
    .set({ revokedAt: sql`now()` })
    .where(
      and(
        eq(apiKeys.teamId, teamId),
        eq(apiKeys.createdBy, userId),
        isNull(apiKeys.revokedAt),
        kind ? eq(apiKeys.kind, kind) : undefined,
      ),
    )
    .returning({ id: apiKeys.id });
  return revoked.length;
}

/** This process's cached keys at once; the other processes' when the commit's NOTIFY reaches them. */
function keysChanged(db: DbOrTx, revoked: number): void {
  if (revoked > 0) changeFeedOf(rawSql(db))?.invalidate("api_keys");
}

/**
 * Sets a member's role (the team must keep an owner). A member no longer an owner loses what
 * only owners hold: the invite links they made stop working, and the API keys they made are
 * revoked (an API key can do whatever an owner can; members cannot make one). Their model keys
 * stay. Returns how many keys were revoked.
 */
export async function setMemberRole(
  db: DbOrTx,
  input: { teamId: string; userId: string; role: TeamRole; actorId?: string },
): Promise<{ revokedKeys: number }> {
  let revokedKeys = 0;
  await changeMembership(db, input, async (tx) => {
    await tx
      .update(memberships)
      .set({ role: input.role })
      .where(and(eq(memberships.teamId, input.teamId), eq(memberships.userId, input.userId)));
    if (input.role === "owner") return;
    await dropInvitesOf(tx, input.teamId, input.userId);
    revokedKeys = await revokeKeysOf(tx, input.teamId, input.userId, "api");
  });
  keysChanged(db, revokedKeys);
  return { revokedKeys };
}

/**
 * Takes a member out of the team (the team must keep an owner). Their dashboard loses the team
 * at its next request, their running playground streams end (the memberships trigger), and the
 * invite links they made stop working. The API keys they made are revoked, as a demotion's are
 * (an API key can do whatever an owner can: an ex-owner's would outlive their access); their
 * model keys stay (keys belong to the team), unless `revokeKeys`: then those are revoked with it
 * too, and their running requests end.
 * `actorId` may remove themselves (leave) without being an owner. Returns how many were revoked.
 */
export async function removeMember(
  db: DbOrTx,
  input: { teamId: string; userId: string; revokeKeys?: boolean; actorId?: string },
): Promise<{ revokedKeys: number }> {
  let revokedKeys = 0;
  await changeMembership(db, { ...input, selfAllowed: !input.revokeKeys }, async (tx) => {
    await tx.delete(memberships).where(and(eq(memberships.teamId, input.teamId), eq(memberships.userId, input.userId)));
    await dropInvitesOf(tx, input.teamId, input.userId);
    revokedKeys = await revokeKeysOf(tx, input.teamId, input.userId, input.revokeKeys ? undefined : "api");
  });
  keysChanged(db, revokedKeys);
  return { revokedKeys };
}

/** The invite links `userId` made for the team: gone (someone no longer its owner made them). */
async function dropInvitesOf(tx: DbOrTx, teamId: string, userId: string): Promise<void> {
  await tx.delete(teamInvites).where(and(eq(teamInvites.teamId, teamId), eq(teamInvites.createdBy, userId)));
}

const toInviteDto = (r: typeof teamInvites.$inferSelect & { createdByEmail: string | null }): InviteDto => ({
  id: r.id,
  role: r.role,
  createdBy: r.createdByEmail,
  createdAt: r.createdAt.toISOString(),
  expiresAt: r.expiresAt.toISOString(),
});

/** The team's invites that can still be used, newest first. */
export async function listInvites(db: DbOrTx, teamId: string): Promise<InviteDto[]> {
  const rows = await db
    .select({ invite: teamInvites, createdByEmail: users.email })
    .from(teamInvites)
    .leftJoin(users, eq(users.id, teamInvites.createdBy))
    .where(and(eq(teamInvites.teamId, teamId), gt(teamInvites.expiresAt, sql`now()`)))
    .orderBy(sql`${teamInvites.createdAt} desc`);
  return rows.map((r) => toInviteDto({ ...r.invite, createdByEmail: r.createdByEmail }));
}

/**
 * A single-use invite link's token (shown once: only its hash is stored) and the invite. The
 * team's expired invites are dropped on the way.
 */
export async function createInvite(
  db: DbOrTx,
  input: { teamId: string; role: TeamRole; createdBy: string },
): Promise<{ invite: InviteDto; token: string }> {
  const token = TOKEN_PREFIX + randomBytes(32).toString("base64url");
  return db.transaction(async (tx) => {
    await lockTeamAsOwner(tx, input.teamId, input.createdBy);
    await tx
      .delete(teamInvites)
      .where(and(eq(teamInvites.teamId, input.teamId), lte(teamInvites.expiresAt, sql`now()`)));
    const [{ pending }] = (await tx
      .select({ pending: count() })
      .from(teamInvites)
      .where(eq(teamInvites.teamId, input.teamId))) as [{ pending: number }];
    if (pending >= MAX_PENDING_INVITES) {
      throw conflict(`A team can have ${MAX_PENDING_INVITES} pending invites at most: revoke some first.`);
    }
    const [row] = await tx
      .insert(teamInvites)
      .values({
        id: newId("invite"),
        teamId: input.teamId,
        role: input.role,
        tokenHash: hashToken(token),
        createdBy: input.createdBy,
        expiresAt: new Date(Date.now() + INVITE_TTL_MS),
      })
      .returning();
    const [creator] = await tx.select({ email: users.email }).from(users).where(eq(users.id, input.createdBy));
    return { invite: toInviteDto({ ...row!, createdByEmail: creator?.email ?? null }), token };
  });
}

/**
 * Revokes one of the team's invites (404 for any other id, another team's included); `actorId`
 * must be an owner of the team at that moment.
 */
export async function revokeInvite(db: DbOrTx, input: { teamId: string; id: string; actorId?: string }): Promise<void> {
  await db.transaction(async (tx) => {
    await lockTeamAsOwner(tx, input.teamId, input.actorId);
    const gone = await tx
      .delete(teamInvites)
      .where(and(eq(teamInvites.teamId, input.teamId), eq(teamInvites.id, input.id)))
      .returning({ id: teamInvites.id });
    if (gone.length === 0) throw notFound(`No invite with id '${input.id}'.`, "id");
  });
}

/** An invite still usable: not expired, and its maker still an owner of its team. */
const usable = (tokenHash: string) =>
  and(
    eq(teamInvites.tokenHash, tokenHash),
    gt(teamInvites.expiresAt, sql`now()`),
    sql`exists (select 1 from ${memberships} m where m.team_id = ${teamInvites.teamId}
      and m.user_id = ${teamInvites.createdBy} and m.role = 'owner')`,
  );

const invalidInvite = () =>
  notFound("This invite link is not valid: it was used, revoked or has expired. Ask the team's owner for a new one.");

/** What an invite link offers (the page that accepts it shows this), or the 404. */
export async function inviteOf(db: DbOrTx, token: string): Promise<{ team: Team; role: TeamRole; expiresAt: Date }> {
  const [row] = await db
    .select({ team: teams, role: teamInvites.role, expiresAt: teamInvites.expiresAt })
    .from(teamInvites)
    .innerJoin(teams, eq(teams.id, teamInvites.teamId))
    .where(usable(hashToken(token)));
  if (!row) throw invalidInvite();
  return row;
}

/**
 * Makes `userId` a member of the invite's team with the invite's role, and uses the invite up.
 * A user who is a member already gets a 409 and the invite stays (it may be meant for another).
 */
export async function acceptInvite(db: DbOrTx, input: { token: string; userId: string }): Promise<Team> {
  return db.transaction(async (tx) => {
    const { team, role } = await takeInvite(tx, input.token);
    const joined = await tx
      .insert(memberships)
      .values({ userId: input.userId, teamId: team.id, role })
      .onConflictDoNothing()
      .returning({ userId: memberships.userId });
    // Rolled back with the invite's use: it stays for whom it was meant.
    if (joined.length === 0) throw conflict(`You are a member of ${team.name} already.`, "token");
    return team;
  });
}

/**
 * Uses an invite up, within the caller's transaction (locked first: of two, one gets it), and
 * says which team and role it gave; an unusable one is a 404 naming `token`.
 */
export async function takeInvite(tx: DbOrTx, token: string): Promise<{ team: Team; role: TeamRole }> {
  const [row] = await tx
    .select({ invite: teamInvites, team: teams })
    .from(teamInvites)
    .innerJoin(teams, eq(teams.id, teamInvites.teamId))
    .where(usable(hashToken(token)))
    .for("update", { of: teamInvites });
  if (!row) throw invalidInvite();
  await tx.delete(teamInvites).where(eq(teamInvites.id, row.invite.id));
  return { team: row.team, role: row.invite.role };
}
