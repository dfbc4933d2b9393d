// Team members and invite links on the dashboard's endpoints: who may do what, the last owner,
// another team's ids, and a removed member losing the team (its running stream included).
import { describe, expect, it } from "vitest";
import { teams, users } from "@/lib/db/schema";
import { createInvite } from "@/lib/services/members";
import { createTeam } from "@/lib/services/teams";
import { createUser } from "@/lib/services/users";
import { baseUrl, client } from "../helpers/context";
import { makeDeployment, noEosBias, parseSse } from "../helpers/deployments";
import { ownWorld } from "../helpers/own-world";
import { cookiesOf, email, newUser, PASSWORD, signIn, signUp } from "../helpers/session";

/** The dashboard's JSON endpoints with a session cookie, every method. */
const as = (cookie: string) => ({
  get: (path: string) => client().get(path, { cookie }),
  post: (path: string, body: unknown = {}) => client().post(path, body, { cookie }),
  patch: (path: string, body: unknown) => client().call("PATCH", path, body, { cookie }),
  delete: (path: string) => client().call("DELETE", path, undefined, { cookie }),
});

/** An owner's team, and a second user who joined it through an invite link with `role`. */
async function teamWithInvitee(role: "owner" | "member" = "member") {
  const owner = await newUser("Members");
  const made = await as(owner.cookie).post("/api/ui/team/invites", { role });
  expect(made.status, made.text).toBe(201);
  const url = new URL(made.json.url as string);
  expect(url.pathname).toMatch(/^\/invite\/lmp_inv_/);
  const token = url.pathname.split("/").pop()!;
  const invitee = await newUser("Own team");
  const accepted = await fetch(`${baseUrl}/api/ui/invites/accept`, {
    method: "POST",
    headers: { cookie: invitee.cookie, "content-type": "application/json" },
    body: JSON.stringify({ token }),
  });
  expect(accepted.status).toBe(200);
  // The team they joined is their current one (the cookie the browser keeps).
  const teamCookie = cookiesOf(accepted).find((c) => c.startsWith("lmp_team="));
  expect(teamCookie).toBe(`lmp_team=${owner.team.id}`);
  const joined = { ...invitee, cookie: `${invitee.cookie}; ${teamCookie}` };
  return { owner, invitee: joined, token };
}

const memberIds = async (cookie: string) =>
  ((await as(cookie).get("/api/ui/team/members")).json as { email: string; role: string }[]).map(
    (m) => `${m.email}:${m.role}`,
  );

describe("invite links", () => {
  it("let a user join with the invite's role and see the team's data; the link then stops working", async () => {
    const { owner, invitee, token } = await teamWithInvitee();
    const pipeline = await as(owner.cookie).post("/api/ui/pipelines", { name: "shared" });
    const seen = await as(invitee.cookie).get("/api/ui/pipelines");
    expect(seen.json.map((p: { id: string }) => p.id)).toEqual([pipeline.json.id]);
    expect(await memberIds(invitee.cookie)).toEqual([`${owner.email}:owner`, `${invitee.email}:member`]);
    expect((await as(owner.cookie).get("/api/ui/team/invites")).json).toEqual([]);

    const third = await newUser();
    const again = await as(third.cookie).post("/api/ui/invites/accept", { token });
    expect(again.status).toBe(404);
    expect(again.json.error.type).toBe("not_found");
  });

  it("are refused to members, and to requests without a session", async () => {
    const { invitee, token } = await teamWithInvitee();
    const made = await as(invitee.cookie).post("/api/ui/team/invites", { role: "member" });
    expect(made.status).toBe(403);
    expect((await as(invitee.cookie).get("/api/ui/team/invites")).status).toBe(403);
    expect((await client().post("/api/ui/invites/accept", { token })).status).toBe(401);
    const bad = await as(invitee.cookie).post("/api/ui/team/invites", { role: "admin" });
    expect(bad.status).toBe(403); // the role check comes first: a member learns nothing more
  });

  it("validate the role, and revoke only the team's own", async () => {
    const a = await newUser();
    const b = await newUser();
    const bad = await as(a.cookie).post("/api/ui/team/invites", { role: "admin" });
    expect(bad.status).toBe(400);
    expect(bad.json.error.param).toBe("role");
    const theirs = await as(b.cookie).post("/api/ui/team/invites", {});
    expect(theirs.json.invite.role).toBe("member");
    const refused = await as(a.cookie).delete(`/api/ui/team/invites/${theirs.json.invite.id}`);
    expect(refused.status).toBe(404);
    expect((await as(b.cookie).get("/api/ui/team/invites")).json).toHaveLength(1);
    expect((await as(b.cookie).delete(`/api/ui/team/invites/${theirs.json.invite.id}`)).status).toBe(200);
    expect((await as(b.cookie).get("/api/ui/team/invites")).json).toEqual([]);
  });

  it("render a page that offers the team, and a clear one once used", async () => {
    const owner = await newUser("Página Team");
    const made = await as(owner.cookie).post("/api/ui/team/invites", { role: "owner" });
    const page = await fetch(made.json.url as string);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain("Página Team");
    expect(html).toContain("Sign in to accept");
    const unknown = await (await fetch(`${baseUrl}/invite/lmp_inv_unknown`)).text();
    expect(unknown).toContain("Invite link not valid");
  });
});

describe("a tab still showing another team", () => {
  it("is refused with a 409 and changes nothing; switching teams from it works", async () => {
    const { owner, invitee } = await teamWithInvitee();
    // The invitee works in the owner's team (their cookie); a tab still shows their own team.
    const stale = { cookie: invitee.cookie, "x-lmp-team": invitee.team.id };
    const refused = await client().post("/api/ui/pipelines", { name: "where?" }, stale);
    expect(refused.status).toBe(409);
    expect(refused.json.error.message).toMatch(/changed to Members in another tab/);
    for (const cookie of [owner.cookie, invitee.cookie]) {
      expect((await as(cookie).get("/api/ui/pipelines")).json).toEqual([]);
    }
    const current = { cookie: invitee.cookie, "x-lmp-team": owner.team.id };
    expect((await client().post("/api/ui/pipelines", { name: "here" }, current)).status).toBe(200);
    const switched = await client().post("/api/ui/team", { teamId: invitee.team.id }, stale);
    expect(switched.status).toBe(200);
  });
});

describe("members", () => {
  it("owners change roles and remove members; members cannot; the team keeps an owner", async () => {
    const { owner, invitee } = await teamWithInvitee();
    const members = (await as(owner.cookie).get("/api/ui/team/members")).json as { userId: string; you: boolean }[];
    const ownerId = members.find((m) => m.you)!.userId;
    const inviteeId = members.find((m) => !m.you)!.userId;

    expect((await as(invitee.cookie).patch(`/api/ui/team/members/${inviteeId}`, { role: "owner" })).status).toBe(403);
    expect((await as(invitee.cookie).delete(`/api/ui/team/members/${ownerId}`)).status).toBe(403);
    const last = await as(owner.cookie).patch(`/api/ui/team/members/${ownerId}`, { role: "member" });
    expect(last.status).toBe(409);
    expect((await as(owner.cookie).delete(`/api/ui/team/members/${ownerId}`)).status).toBe(409);
    const badRole = await as(owner.cookie).patch(`/api/ui/team/members/${inviteeId}`, { role: "admin" });
    expect(badRole.status).toBe(400);

    expect((await as(owner.cookie).patch(`/api/ui/team/members/${inviteeId}`, { role: "owner" })).status).toBe(200);
    expect(await memberIds(owner.cookie)).toEqual([`${owner.email}:owner`, `${invitee.email}:owner`]);
    expect((await as(owner.cookie).delete(`/api/ui/team/members/${inviteeId}`)).status).toBe(200);
    expect(await memberIds(owner.cookie)).toEqual([`${owner.email}:owner`]);
  });

  it("removing a member can revoke the keys they made, which then stop working", async () => {
    const { owner, invitee } = await teamWithInvitee();
    const dep = await makeDeployment(owner.team);
    const made = await as(invitee.cookie).post("/api/ui/keys", { name: "theirs", kind: "model" });
    expect(made.status).toBe(201);
    expect(made.json.key.createdBy).toBe(invitee.email);
    const call = () =>
      fetch(`${baseUrl}${dep.path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${made.json.secret}`, "content-type": "application/json" },
        body: JSON.stringify({ prompt: "Hi", max_tokens: 2 }),
      });
    expect((await call()).status).toBe(200);
    const members = (await as(owner.cookie).get("/api/ui/team/members")).json as { userId: string; keys: number }[];
    const theirs = members.find((m) => m.keys === 1)!;
    const bad = await as(owner.cookie).delete(`/api/ui/team/members/${theirs.userId}?revokeKeys=maybe`);
    expect(bad.status).toBe(400);
    expect(bad.json.error.param).toBe("revokeKeys");
    expect(await memberIds(owner.cookie)).toHaveLength(2); // nothing changed
    const removed = await as(owner.cookie).delete(`/api/ui/team/members/${theirs.userId}?revokeKeys=true`);
    expect(removed.json).toMatchObject({ removed: true, revokedKeys: 1 });
    expect((await call()).status).toBe(401);
  });

  it("another team's member is not found, and stays", async () => {
    const { owner, invitee } = await teamWithInvitee();
    const stranger = await newUser();
    const inviteeId = (
      (await as(owner.cookie).get("/api/ui/team/members")).json as { userId: string; you: boolean }[]
    ).find((m) => !m.you)!.userId;
    const res = await as(stranger.cookie).delete(`/api/ui/team/members/${inviteeId}`);
    expect(res.status).toBe(404);
    expect(await memberIds(owner.cookie)).toContain(`${invitee.email}:member`);
  });

  it("a member who leaves, or is removed, loses the team at the next request", async () => {
    const { owner, invitee } = await teamWithInvitee();
    await as(owner.cookie).post("/api/ui/pipelines", { name: "team only" });
    const inviteeId = (
      (await as(invitee.cookie).get("/api/ui/team/members")).json as { userId: string; you: boolean }[]
    ).find((m) => m.you)!.userId;
    expect((await as(invitee.cookie).get("/api/ui/pipelines")).json).toHaveLength(1);
    expect((await as(invitee.cookie).delete(`/api/ui/team/members/${inviteeId}`)).status).toBe(200);
    // The cookie still names the team: it is ignored, and their own (empty) team is used.
    expect((await as(invitee.cookie).get("/api/ui/pipelines")).json).toEqual([]);
    expect(await memberIds(owner.cookie)).toEqual([`${owner.email}:owner`]);
  });

  it("a user left with no team gets a page that says so, not a loop between sign-in and the dashboard", async () => {
    const { owner, invitee } = await teamWithInvitee("owner");
    const ownerId = (
      (await as(owner.cookie).get("/api/ui/team/members")).json as { userId: string; you: boolean }[]
    ).find((m) => m.you)!.userId;
    // The team's first owner leaves (another owner stays): they belong to no team now.
    expect((await as(owner.cookie).delete(`/api/ui/team/members/${ownerId}`)).status).toBe(200);
    expect(await memberIds(invitee.cookie)).toEqual([`${invitee.email}:owner`]);
    const api = await as(owner.cookie).get("/api/ui/pipelines");
    expect(api.status).toBe(403);
    expect(api.json.error.message).toMatch(/not a member of any team/);
    for (const path of ["/pipelines", "/settings/members"]) {
      const page = await fetch(`${baseUrl}${path}`, { headers: { cookie: owner.cookie }, redirect: "manual" });
      expect(page.status).toBe(307);
      expect(new URL(page.headers.get("location")!, baseUrl).pathname).toBe("/no-team");
    }
    const noTeam = await fetch(`${baseUrl}/no-team`, { headers: { cookie: owner.cookie } });
    expect(await noTeam.text()).toContain("You are not in any team");
  });

  it("a removed member's running playground stream ends with the 403", async () => {
    const { owner, invitee } = await teamWithInvitee();
    const dep = await makeDeployment(owner.team);
    const inviteeId = (
      (await as(invitee.cookie).get("/api/ui/team/members")).json as { userId: string; you: boolean }[]
    ).find((m) => m.you)!.userId;
    const body = { prompt: "The city was quiet", max_tokens: 1000, temperature: 0, logit_bias: await noEosBias() };
    const res = await fetch(`${baseUrl}/api/ui/deployments/${dep.name}/stream`, {
      method: "POST",
      headers: { cookie: invitee.cookie, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = decoder.decode((await reader.read()).value, { stream: true });
    expect((await as(owner.cookie).delete(`/api/ui/team/members/${inviteeId}`)).status).toBe(200);
    const t = performance.now();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    expect(performance.now() - t).toBeLessThan(2_000); // the 1,000 tokens take longer
    const last = parseSse(text).at(-1)!;
    expect(JSON.parse(last.data)).toEqual({
      error: { type: "forbidden", message: "You are no longer a member of this team." },
    });
  });
});

describe("signing up with an invite link", () => {
  it("joins the invite's team with its role, with no team of one's own, and uses the invite up", async () => {
    const owner = await newUser("Join Labs");
    const made = await as(owner.cookie).post("/api/ui/team/invites", { role: "member" });
    const token = new URL(made.json.url as string).pathname.split("/").pop()!;
    const address = email();
    const res = await signUp({ email: address, password: PASSWORD, invite: token });
    expect(res.status, res.text).toBe(201);
    expect(res.json.team.id).toBe(owner.team.id);
    const cookie = await signIn(address);
    expect((await as(cookie).get("/api/ui/team/members")).json.map((m: { email: string }) => m.email).sort()).toEqual(
      [owner.email, address].sort(),
    );
    // The invite is used up; an unknown one creates nobody.
    const again = await signUp({ email: email(), password: PASSWORD, invite: token });
    expect(again.status).toBe(404);
    expect(again.json.error.param).toBe("invite");
  });

  it("is the only way in with SIGN_UP=invite: the pages and the API say so", async () => {
    const world = await ownWorld("invite-only", { app: { SIGN_UP: "invite" } });
    try {
      const url = world.app.url;
      const post = (body: object) =>
        fetch(`${url}/api/ui/sign-up`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
        });
      const refused = await post({ email: email(), password: PASSWORD });
      expect(refused.status).toBe(403);
      expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(/invite link/);
      expect(await world.handle.db.select().from(users)).toEqual([]); // nobody made
      const page = await (await fetch(`${url}/sign-up`)).text();
      expect(page).toContain("Accounts are made with an invite link");
      expect(page).not.toContain("Create account</button>");
      expect(await (await fetch(`${url}/sign-in`)).text()).toContain("Ask a team owner for an invite link");

      const team = await createTeam(world.handle.db, { slug: "invite-only" });
      const owner = await createUser(world.handle.db, {
        email: email(),
        password: PASSWORD,
        teamId: team.id,
        role: "owner",
      });
      const { token } = await createInvite(world.handle.db, { teamId: team.id, role: "member", createdBy: owner.id });
      const invited = await (
        await fetch(`${url}/sign-up?callbackUrl=${encodeURIComponent(`/invite/${token}`)}`)
      ).text();
      expect(invited).toContain("You join the team that invited you");
      const joined = await post({ email: email(), password: PASSWORD, invite: token });
      expect(joined.status).toBe(201);
      expect(((await joined.json()) as { team: { id: string } }).team.id).toBe(team.id);
      expect(await world.handle.db.select().from(teams)).toHaveLength(1); // no team of their own
    } finally {
      await world.close();
    }
  }, 120_000);
});
