import { describe, expect, it } from "vitest";
import { sql } from "drizzle-orm";
import { createApiKey, revokeApiKey } from "@/lib/services/api-keys";
import { createUser } from "@/lib/services/users";
import { baseUrl, client, db, makeTeam } from "../helpers/context";
import { makeDeployment } from "../helpers/deployments";
import { as, email, PASSWORD, signIn } from "../helpers/session";

/** A signed-in member (not owner) of `teamId`. */
async function member(teamId: string): Promise<string> {
  const address = email();
  await createUser(db().db, { email: address, password: PASSWORD, teamId, role: "member" });
  return signIn(address);
}

describe("roles", () => {
  it("lets members read keys and datasets but not revoke keys or delete datasets; owners can", async () => {
    const team = await makeTeam();
    const cookie = await member(team.id);
    const owner = email();
    await createUser(db().db, { email: owner, password: PASSWORD, teamId: team.id, role: "owner" });
    const ownerCookie = await signIn(owner);

    expect((await as(cookie).get("/api/ui/keys")).status).toBe(200);
    const revoke = await as(cookie).post(`/api/ui/keys/${team.keyId}/revoke`);
    expect(revoke.status).toBe(403);
    expect(revoke.json.error).toMatchObject({ type: "forbidden", message: "Only owners of the team can revoke keys." });
    expect((await client(team.apiKey).get("/v1/pipelines/list")).status).toBe(200); // still valid

    const api = client(team.apiKey);
    const pipeline = (await api.post("/v1/pipelines/create", { name: "p" })).json.id as string;
    const dataset = (await api.post(`/v1/pipelines/${pipeline}/create-dataset`, { name: "kept" })).json.id as string;
    const del = await client().call("DELETE", `/api/ui/datasets/${dataset}`, undefined, { cookie });
    expect(del.status).toBe(403);
    expect((await api.get(`/v1/datasets/${dataset}`)).status).toBe(200);

    // An API key could do what an owner can (delete datasets, pipelines, samples): a member may
    // create model keys only.
    const apiKey = await as(cookie).post("/api/ui/keys", { kind: "api", name: "mine" });
    expect(apiKey.status).toBe(403);
    expect(apiKey.json.error.message).toMatch(/^Only owners of the team can create API keys/);
    expect((await as(cookie).get("/api/ui/keys")).json).toHaveLength(2); // the team's two, no more
    const modelKey = await as(cookie).post("/api/ui/keys", { kind: "model", name: "mine" });
    expect(modelKey.status).toBe(201);
    expect((await as(ownerCookie).post("/api/ui/keys", { kind: "api", name: "theirs" })).status).toBe(201);

    expect((await as(ownerCookie).post(`/api/ui/keys/${team.keyId}/revoke`)).status).toBe(200);
    expect(
      (await client().call("DELETE", `/api/ui/datasets/${dataset}`, undefined, { cookie: ownerCookie })).status,
    ).toBe(200);
  });
});

describe("browser protections", () => {
  it("forbids framing every page", async () => {
    for (const path of ["/sign-in", "/settings/keys", "/v1/pipelines/list"]) {
      const res = await fetch(baseUrl + path, { redirect: "manual" });
      expect(res.headers.get("x-frame-options"), path).toBe("DENY");
      expect(res.headers.get("content-security-policy"), path).toContain("frame-ancestors 'none'");
    }
  });

  it("refuses a cross-site request to a session route (another site cannot start a playground generation)", async () => {
    const team = await makeTeam();
    const owner = email();
    await createUser(db().db, { email: owner, password: PASSWORD, teamId: team.id, role: "owner" });
    const cookie = await signIn(owner);
    await makeDeployment(team, "play");
    const path = "/api/ui/deployments/play/stream";
    const body = { prompt: "Hello", max_tokens: 2 };
    const crossSite = await client().post(path, body, { cookie, "sec-fetch-site": "cross-site" });
    expect(crossSite.status).toBe(403);
    expect(crossSite.json.error.type).toBe("forbidden");
    const crossSiteGet = await client().get("/api/ui/keys", { cookie, "sec-fetch-site": "cross-site" });
    expect(crossSiteGet.status).toBe(403);
    const sameOrigin = await client().post(path, body, { cookie, "sec-fetch-site": "same-origin" });
    expect(sameOrigin.status).toBe(200);
  });

  it("takes PUBLIC_URL's origin behind a reverse proxy that sends its upstream address as the host", async () => {
    const team = await makeTeam();
    const owner = email();
    await createUser(db().db, { email: owner, password: PASSWORD, teamId: team.id, role: "owner" });
    const cookie = await signIn(owner);
    // nginx's plain proxy_pass: Host is the app's own address, the browser's Origin the public one.
    const proxied = { cookie, "x-forwarded-host": "127.0.0.1:3000" };
    const body = { name: "behind-proxy" };
    const mine = await client().post("/api/ui/pipelines", body, { ...proxied, origin: new URL(baseUrl).origin });
    // Before: 403 "Cross-origin request refused." for every change made from the dashboard.
    expect(mine.status, mine.text).toBe(200);
    const foreign = await client().post("/api/ui/pipelines", body, { ...proxied, origin: "https://evil.example" });
    expect(foreign.status).toBe(403);
    expect(foreign.json.error.message).toBe("Cross-origin request refused.");
  });
});

describe("sign-in endpoints", () => {
  it("refuse a body past 64 KiB with 413 before next-auth reads it (declared or chunked); sign-in still works", async () => {
    const url = `${baseUrl}/api/auth/callback/credentials`;
    const big = JSON.stringify({ email: "a@b.c", password: "x".repeat(2 * 1024 * 1024) });
    const declared = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: big });
    expect(declared.status).toBe(413);
    expect((await declared.json()).error.type).toBe("payload_too_large");
    // Chunked (no Content-Length): counted while read.
    const bytes = new TextEncoder().encode(big);
    const chunked = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: new ReadableStream({
        start(c) {
          for (let i = 0; i < bytes.length; i += 65_536) c.enqueue(bytes.subarray(i, i + 65_536));
          c.close();
        },
      }),
      duplex: "half",
    } as RequestInit);
    expect(chunked.status).toBe(413);
    // An ordinary sign-in form passes through to next-auth unchanged.
    const team = await makeTeam();
    const address = email();
    await createUser(db().db, { email: address, password: PASSWORD, teamId: team.id, role: "owner" });
    expect(await signIn(address)).toMatch(/session-token=/);
  });
});

describe("a key revoked while its listing is being sent", () => {
  it("cuts the array: a slow reader of a leaked key stops reading the pipeline", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    const pipeline = (await api.post("/v1/pipelines/create", { name: "big" })).json.id as string;
    // 30,000 samples (several megabytes of listing: more than the sockets' buffers hold).
    await db().db.execute(sql`
      insert into samples (id, pipeline_id, team_id, messages, length, user_id)
      select 'sample_rv' || g, ${pipeline}, ${team.id},
             '[{"role":"user","content":"a question of some length"},{"role":"assistant","content":"an answer"}]'::jsonb,
             2, 'user-' || g
      from generate_series(1, 30000) g`);
    const res = await fetch(`${baseUrl}/v1/pipelines/${pipeline}/samples`, {
      method: "POST",
      headers: { authorization: `Bearer ${team.apiKey}`, "content-type": "application/json" },
      body: "{}",
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let received = (await reader.read()).value!.length;
    await revokeApiKey(db().db, { id: team.keyId, teamId: team.id });
    await new Promise((r) => setTimeout(r, 300)); // the revocation reaches the app's watch
    const cut = await (async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return false;
        received += value.length;
      }
    })().catch(() => true);
    expect(cut).toBe(true);
    // What came is far from the whole listing (each sample is over 150 bytes of it).
    expect(received).toBeLessThan(30_000 * 150);
  });
});

describe("health", () => {
  it("reports the database and the live workers, and liveness separately", async () => {
    const res = await client().get("/api/health");
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ status: "ok", database: { ok: true }, workers: { live: expect.any(Number) } });
    expect(res.json.workers.live).toBeGreaterThanOrEqual(1);
    // From this machine, with no METRICS_TOKEN set, the caller is an operator: the models are listed.
    expect(res.json.workers.models.length).toBeGreaterThanOrEqual(1);
    expect((await client().get("/api/health/live")).json).toEqual({ ok: true });
  });
});

describe("deployment endpoint", () => {
  it("refuses an unknown key before reading the body", async () => {
    const team = await makeTeam();
    const d = await makeDeployment(team, "body-last");
    // Invalid JSON behind a bad key: the answer is about the key.
    const res = await client("lmp_mk_" + "A".repeat(43)).post(`/deployments/${team.slug}/${d.name}`, "{not json");
    expect(res.status).toBe(401);
    const { secret } = await createApiKey(db().db, { teamId: team.id, kind: "model" });
    const bad = await client(secret).post(`/deployments/${team.slug}/${d.name}`, "{not json");
    expect(bad.status).toBe(400);
  });
});
