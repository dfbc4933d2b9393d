import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFeedWorld } from "../db/throwaway";
import type { DbHandle } from "../db/client";
import { ApiError } from "../errors";
import {
  acceptInvite,
  createInvite,
  inviteOf,
  listInvites,
  listMembers,
  MAX_PENDING_INVITES,
  removeMember,
  revokeInvite,
  setMemberRole,
} from "./members";
import { createApiKey } from "./api-keys";
import { createTeam, listTeamsOfUser } from "./teams";
import { insertUser } from "./users";

let world: Awaited<ReturnType<typeof startFeedWorld>>;
let h: DbHandle;

beforeAll(async () => {
  world = await startFeedWorld("members");
  h = world.app;
}, 60_000);

afterAll(async () => {
  await world?.close();
});

const suffix = () => Math.random().toString(36).slice(2, 10);
const newTeam = () => createTeam(h.db, { slug: `t-${suffix()}` });
/** A user (a throwaway hash: these tests never sign in), optionally a member of `teamId`. */
async function user(teamId: string, role: "owner" | "member" = "member") {
  return insertUser(h.db, { email: `u-${suffix()}@example.com`, name: null, passwordHash: "unused" }, { teamId, role });
}
const roles = async (teamId: string) =>
  Object.fromEntries((await listMembers(h.db, teamId, "")).map((m) => [m.userId, m.role]));

async function rejection(p: Promise<unknown>): Promise<ApiError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  return err as ApiError;
}

describe("members", () => {
  it("lists owners first, then by joining, and marks the viewer", async () => {
    const team = await newTeam();
    const a = await user(team.id);
    const b = await user(team.id, "owner");
    const list = await listMembers(h.db, team.id, a.id);
    expect(list.map((m) => [m.email, m.role, m.you])).toEqual([
      [b.email, "owner", false],
      [a.email, "member", true],
    ]);
  });

  it("keeps an owner: the last one can be neither demoted nor removed", async () => {
    const team = await newTeam();
    const owner = await user(team.id, "owner");
    const member = await user(team.id);
    for (const attempt of [
      () => setMemberRole(h.db, { teamId: team.id, userId: owner.id, role: "member" }),
      () => removeMember(h.db, { teamId: team.id, userId: owner.id }),
    ]) {
      expect(await rejection(attempt())).toMatchObject({ status: 409, type: "conflict" });
    }
    expect(await roles(team.id)).toEqual({ [owner.id]: "owner", [member.id]: "member" });
    // With a second owner, the first may step down, and leave.
    await setMemberRole(h.db, { teamId: team.id, userId: member.id, role: "owner" });
    await setMemberRole(h.db, { teamId: team.id, userId: owner.id, role: "member" });
    await removeMember(h.db, { teamId: team.id, userId: owner.id });
    expect(await roles(team.id)).toEqual({ [member.id]: "owner" });
    expect(await listTeamsOfUser(h.db, owner.id)).toEqual([]);
  });

  it("two owners demoting each other at once leave one owner", async () => {
    const team = await newTeam();
    const [a, b] = [await user(team.id, "owner"), await user(team.id, "owner")];
    const results = await Promise.allSettled([
      setMemberRole(h.db, { teamId: team.id, userId: a.id, role: "member" }),
      setMemberRole(h.db, { teamId: team.id, userId: b.id, role: "member" }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual(["fulfilled", "rejected"]);
    expect(Object.values(await roles(team.id)).sort()).toEqual(["member", "owner"]);
  });

  it("answers 404 for a user who is not a member of this team, another team's included", async () => {
    const [team, other] = [await newTeam(), await newTeam()];
    await user(team.id, "owner");
    const stranger = await user(other.id);
    for (const attempt of [
      () => removeMember(h.db, { teamId: team.id, userId: stranger.id }),
      () => setMemberRole(h.db, { teamId: team.id, userId: stranger.id, role: "owner" }),
      () => removeMember(h.db, { teamId: team.id, userId: "usr_nobody" }),
    ]) {
      expect(await rejection(attempt())).toMatchObject({ status: 404, type: "not_found" });
    }
    expect(await roles(other.id)).toEqual({ [stranger.id]: "member" });
  });
});

describe("a member's keys", () => {
  it("are counted; removed, a member's model keys stay (their API keys do not), all go when asked", async () => {
    const team = await newTeam();
    const owner = await user(team.id, "owner");
    const [a, b] = [await user(team.id), await user(team.id)];
    for (const m of [a, a, b]) await createApiKey(h.db, { teamId: team.id, kind: "model", createdBy: m.id });
    await createApiKey(h.db, { teamId: team.id, kind: "api" }); // the CLI's: nobody's
    // An API key b made while an owner (the row as a demotion would have left it, made directly).
    await createApiKey(h.db, { teamId: team.id, kind: "api", createdBy: b.id });
    const keysOf = async () =>
      Object.fromEntries((await listMembers(h.db, team.id, owner.id)).map((m) => [m.userId, m.keys]));
    expect(await keysOf()).toEqual({ [owner.id]: 0, [a.id]: 2, [b.id]: 2 });

    expect(await removeMember(h.db, { teamId: team.id, userId: b.id })).toEqual({ revokedKeys: 1 });
    expect(await removeMember(h.db, { teamId: team.id, userId: a.id, revokeKeys: true })).toEqual({ revokedKeys: 2 });
    const valid = await world.other<{ created_by: string | null }[]>`
      select created_by from api_keys where team_id = ${team.id} and revoked_at is null order by created_by`;
    expect(valid.map((k) => k.created_by)).toEqual([b.id, null]);
  });
});

describe("an owner no longer an owner", () => {
  it("leaves no invite link working: removed, or made a member (who could then leave and rejoin as owner)", async () => {
    for (const how of ["removed", "demoted"] as const) {
      const team = await newTeam();
      const [x, y] = [await user(team.id, "owner"), await user(team.id, "owner")];
      const { token } = await createInvite(h.db, { teamId: team.id, role: "owner", createdBy: x.id });
      if (how === "removed") await removeMember(h.db, { teamId: team.id, userId: x.id, actorId: y.id });
      else await setMemberRole(h.db, { teamId: team.id, userId: x.id, role: "member", actorId: y.id });
      expect(await listInvites(h.db, team.id)).toEqual([]);
      const other = await newTeam();
      const back = await user(other.id);
      expect(await rejection(acceptInvite(h.db, { token, userId: back.id }))).toMatchObject({ status: 404 });
    }
  });

  it("loses the API keys they made (an API key can do what an owner can), not their model keys", async () => {
    const team = await newTeam();
    const [x, y] = [await user(team.id, "owner"), await user(team.id, "owner")];
    await createApiKey(h.db, { teamId: team.id, kind: "api", createdBy: x.id });
    await createApiKey(h.db, { teamId: team.id, kind: "model", createdBy: x.id });
    await createApiKey(h.db, { teamId: team.id, kind: "api", createdBy: y.id });
    const demoted = await setMemberRole(h.db, { teamId: team.id, userId: x.id, role: "member", actorId: y.id });
    expect(demoted).toEqual({ revokedKeys: 1 });
    const valid = await world.other<{ kind: string; created_by: string }[]>`
      select kind, created_by from api_keys where team_id = ${team.id} and revoked_at is null order by kind`;
    expect(valid.map((k) => [k.kind, k.created_by])).toEqual([
      ["api", y.id],
      ["model", x.id],
    ]);
  });

  it("cannot act as one any more, even with a request that passed its session's check before", async () => {
    const team = await newTeam();
    const [x, y] = [await user(team.id, "owner"), await user(team.id)];
    await setMemberRole(h.db, { teamId: team.id, userId: y.id, role: "owner", actorId: x.id });
    await setMemberRole(h.db, { teamId: team.id, userId: x.id, role: "member", actorId: y.id });
    // x's requests, checked as an owner's a moment before: refused under the team's lock.
    for (const attempt of [
      () => setMemberRole(h.db, { teamId: team.id, userId: x.id, role: "owner", actorId: x.id }),
      () => removeMember(h.db, { teamId: team.id, userId: y.id, actorId: x.id }),
      () => createInvite(h.db, { teamId: team.id, role: "owner", createdBy: x.id }),
      () => removeMember(h.db, { teamId: team.id, userId: x.id, actorId: x.id, revokeKeys: true }),
    ]) {
      expect(await rejection(attempt())).toMatchObject({ status: 403 });
    }
    expect(await roles(team.id)).toEqual({ [x.id]: "member", [y.id]: "owner" });
    // Leaving stays open to them.
    await removeMember(h.db, { teamId: team.id, userId: x.id, actorId: x.id });
    expect(await roles(team.id)).toEqual({ [y.id]: "owner" });
  });
});

describe("invites", () => {
  it("a link works once, with its role, and shows what it offers until then", async () => {
    const team = await newTeam();
    const owner = await user(team.id, "owner");
    const { invite, token } = await createInvite(h.db, { teamId: team.id, role: "owner", createdBy: owner.id });
    expect(token).toMatch(/^lmp_inv_[A-Za-z0-9_-]{43}$/);
    expect(invite).toMatchObject({ role: "owner", createdBy: owner.email });
    expect(await listInvites(h.db, team.id)).toEqual([invite]);
    expect(await inviteOf(h.db, token)).toMatchObject({ team: { id: team.id }, role: "owner" });

    const [other] = [await newTeam()];
    const joiner = await user(other.id, "owner");
    expect((await acceptInvite(h.db, { token, userId: joiner.id })).id).toBe(team.id);
    expect((await roles(team.id))[joiner.id]).toBe("owner");
    expect(await listInvites(h.db, team.id)).toEqual([]);

    const late = await user(other.id);
    expect(await rejection(acceptInvite(h.db, { token, userId: late.id }))).toMatchObject({ status: 404 });
    expect(await rejection(inviteOf(h.db, token))).toMatchObject({ status: 404 });
    expect((await roles(team.id))[late.id]).toBeUndefined();
  });

  it("a member already: 409, and the link stays for the person it was meant for", async () => {
    const team = await newTeam();
    const owner = await user(team.id, "owner");
    const { token } = await createInvite(h.db, { teamId: team.id, role: "member", createdBy: owner.id });
    expect(await rejection(acceptInvite(h.db, { token, userId: owner.id }))).toMatchObject({ status: 409 });
    expect((await roles(team.id))[owner.id]).toBe("owner"); // not demoted by a member invite
    const other = await newTeam();
    const newcomer = await user(other.id, "owner");
    await acceptInvite(h.db, { token, userId: newcomer.id });
    expect((await roles(team.id))[newcomer.id]).toBe("member");
  });

  it("a revoked or expired link, or an unknown token, is the same 404", async () => {
    const team = await newTeam();
    const owner = await user(team.id, "owner");
    const other = await newTeam();
    const joiner = await user(other.id, "owner");
    const revoked = await createInvite(h.db, { teamId: team.id, role: "member", createdBy: owner.id });
    await revokeInvite(h.db, { teamId: team.id, id: revoked.invite.id });
    const expired = await createInvite(h.db, { teamId: team.id, role: "member", createdBy: owner.id });
    await world.other`update team_invites set expires_at = now() - interval '1 second' where id = ${expired.invite.id}`;
    expect(await listInvites(h.db, team.id)).toEqual([]);
    const messages = new Set<string>();
    for (const token of [revoked.token, expired.token, "lmp_inv_nothing"]) {
      const err = await rejection(acceptInvite(h.db, { token, userId: joiner.id }));
      expect(err.status).toBe(404);
      messages.add(err.message);
    }
    expect(messages.size).toBe(1);
    expect(await roles(team.id)).toEqual({ [owner.id]: "owner" });
  });

  it("revoking another team's invite is a 404 and leaves it working", async () => {
    const [team, other] = [await newTeam(), await newTeam()];
    const owner = await user(team.id, "owner");
    const otherOwner = await user(other.id, "owner");
    const theirs = await createInvite(h.db, { teamId: other.id, role: "member", createdBy: otherOwner.id });
    expect(await rejection(revokeInvite(h.db, { teamId: team.id, id: theirs.invite.id }))).toMatchObject({
      status: 404,
    });
    expect(await inviteOf(h.db, theirs.token)).toMatchObject({ team: { id: other.id } });
    expect(owner).toBeDefined();
  });

  it("two people using one link at once: one joins", async () => {
    const team = await newTeam();
    const owner = await user(team.id, "owner");
    const { token } = await createInvite(h.db, { teamId: team.id, role: "member", createdBy: owner.id });
    const other = await newTeam();
    const [a, b] = [await user(other.id), await user(other.id)];
    const results = await Promise.allSettled([
      acceptInvite(h.db, { token, userId: a.id }),
      acceptInvite(h.db, { token, userId: b.id }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual(["fulfilled", "rejected"]);
    expect(Object.keys(await roles(team.id))).toHaveLength(2);
  });

  it(`caps a team's pending invites at ${MAX_PENDING_INVITES}; expired ones make room`, async () => {
    const team = await newTeam();
    const owner = await user(team.id, "owner");
    const made = [];
    for (let i = 0; i < MAX_PENDING_INVITES; i++) {
      made.push(await createInvite(h.db, { teamId: team.id, role: "member", createdBy: owner.id }));
    }
    const refused = await rejection(createInvite(h.db, { teamId: team.id, role: "member", createdBy: owner.id }));
    expect(refused).toMatchObject({ status: 409 });
    await world.other`update team_invites set expires_at = now() - interval '1 second' where id = ${made[0]!.invite.id}`;
    await createInvite(h.db, { teamId: team.id, role: "member", createdBy: owner.id });
    expect(await listInvites(h.db, team.id)).toHaveLength(MAX_PENDING_INVITES);
  });
});
