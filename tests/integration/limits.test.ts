import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { createDataset } from "@/lib/services/datasets";
import { createApiKey } from "@/lib/services/api-keys";
import { setTeamLimits } from "@/lib/services/teams";
import { createUser } from "@/lib/services/users";
import { client, db, makeTeam } from "../helpers/context";
import { complete, makeDeployment } from "../helpers/deployments";
import { ownWorld } from "../helpers/own-world";
import { email, PASSWORD, signInAttempt } from "../helpers/session";

const limit = (teamId: string, limits: Parameters<typeof setTeamLimits>[1]["limits"]) =>
  setTeamLimits(db().db, { teamId, limits });

describe("rate limits and quotas", () => {
  it("refuses a key past its team's requests per minute with 429 and the headers; others go on", async () => {
    const team = await makeTeam();
    const other = await makeTeam();
    await limit(team.id, { requestsPerMinute: 3 });
    const api = client(team.apiKey);
    const pipeline = (await api.post("/v1/pipelines/create", { name: "limited" })).json.id as string;
    const first = await api.get("/v1/pipelines/list");
    expect(first.status).toBe(200);
    expect(first.headers.get("ratelimit-limit")).toBe("3");
    expect(first.headers.get("ratelimit-remaining")).toBe("1");
    // add is served by its own route wrapper: the same limit.
    expect(
      (await api.post(`/v1/pipelines/${pipeline}/add`, { messages: [{ role: "user", content: "x" }] })).status,
    ).toBe(200);
    for (const res of [
      await api.get("/v1/pipelines/list"),
      await api.post(`/v1/pipelines/${pipeline}/add`, { messages: [{ role: "user", content: "y" }] }),
    ]) {
      expect(res.status).toBe(429);
      expect(res.json.error.type).toBe("rate_limited");
      expect(Number(res.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(res.headers.get("ratelimit-remaining")).toBe("0");
    }
    // Per key: the team's other key, and another team, are not affected.
    const second = await createApiKey(db().db, { teamId: team.id, kind: "api" });
    expect((await client(second.secret).get("/v1/pipelines/list")).status).toBe(200);
    expect((await client(other.apiKey).get("/v1/pipelines/list")).status).toBe(200);
    expect((await api.post(`/v1/pipelines/${pipeline}/count`, {})).status).toBe(429);
    expect((await client(second.secret).post(`/v1/pipelines/${pipeline}/count`, {})).json).toEqual({ count: 1 });
  });

  it("bounds a model key's concurrent generations and tokens per minute", async () => {
    const team = await makeTeam();
    const dep = await makeDeployment(team);
    await limit(team.id, { concurrentStreams: 1, tokensPerMinute: 40, requestsPerMinute: 100 });
    // A stream holds the key's one slot until it ends.
    const open = await fetch(dep.url, {
      method: "POST",
      headers: { authorization: `Bearer ${team.modelKey}`, "content-type": "application/json" },
      body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 200, stream: true, temperature: 0 }),
    });
    expect(open.status).toBe(200);
    const busy = await complete(dep, team.modelKey, { prompt: "Hi", max_tokens: 2 });
    expect(busy.status).toBe(429);
    expect(busy.json.error.message).toMatch(/generations running/);
    await open.text(); // the stream ends: its slot is free, its tokens (well over 40) are charged
    const spent = await complete(dep, team.modelKey, { prompt: "Hi", max_tokens: 2 });
    expect(spent.status).toBe(429);
    expect(spent.json.error.message).toMatch(/used its 40 tokens/);
    expect(Number(spent.headers.get("retry-after"))).toBeGreaterThan(1);
    // RateLimit-* stay the requests-per-minute limit's, as documented (the hosted API's too).
    expect(spent.headers.get("ratelimit-limit")).toBe("100");
    const chat = (max_tokens: number) =>
      client(team.apiKey).post("/v1/chat/completions", {
        model: dep.name,
        messages: [{ role: "user", content: "Tell me a story" }], // no EOS in its first 300 tokens
        max_tokens,
        temperature: 0,
      });
    expect((await chat(60)).status).toBe(200);
    const chatSpent = await chat(2);
    expect(chatSpent.status).toBe(429);
    expect(chatSpent.json.error.message).toMatch(/used its 40 tokens/);
    expect(Number(chatSpent.headers.get("retry-after"))).toBeGreaterThan(1);
    expect(chatSpent.headers.get("ratelimit-limit")).toBe("100");
    expect(Number(chatSpent.headers.get("ratelimit-remaining"))).toBeGreaterThan(90);
  });

  it("refuses a team's dataset past its packaging quota", async () => {
    const team = await makeTeam();
    await limit(team.id, { datasetJobs: 1, requestsPerMinute: 100 });
    const api = client(team.apiKey);
    const pipeline = (await api.post("/v1/pipelines/create", { name: "p" })).json.id as string;
    // One dataset being packaged (leased by a worker for the next hour).
    const first = await createDataset(db().db, { teamId: team.id, pipelineId: pipeline, name: "first", selection: {} });
    await db().db.execute(
      sql`update datasets set lease_owner = 'busy-worker', lease_expires_at = now() + interval '1 hour' where id = ${first.id}`,
    );
    const refused = await api.post(`/v1/pipelines/${pipeline}/create-dataset`, { name: "second" });
    expect(refused.status).toBe(429);
    expect(refused.json.error.message).toMatch(/datasets being packaged \(limit 1\)/);
    expect(refused.headers.get("retry-after")).toBe("10");
    expect(refused.headers.get("ratelimit-limit")).toBe("100"); // an App Router route's refusal too
    // Another team is not held up by it.
    const other = client((await makeTeam()).apiKey);
    const otherPipeline = (await other.post("/v1/pipelines/create", { name: "p" })).json.id as string;
    expect((await other.post(`/v1/pipelines/${otherPipeline}/create-dataset`, { name: "x" })).status).toBe(200);
    // Once the first is done, the team may create again.
    await db().db.execute(sql`update datasets set status = 'FAILED', lease_owner = null where id = ${first.id}`);
    expect((await api.post(`/v1/pipelines/${pipeline}/create-dataset`, { name: "second" })).status).toBe(200);
  });

  it("refuses an account's sign-ins past ten attempts in 15 minutes, even with the right password", async () => {
    const team = await makeTeam();
    const address = email();
    await createUser(db().db, { email: address, password: PASSWORD, teamId: team.id });
    for (let i = 0; i < 10; i++) expect((await signInAttempt(address, "wrong password")).session).toBeUndefined();
    const refused = await signInAttempt(address, PASSWORD);
    expect(refused.session).toBeUndefined();
    expect(refused.error).toMatch(/Too many sign-in attempts/);
  });
});

describe("the per-address limit of sign-ins and sign-ups", () => {
  // Behind a proxy on a loopback or private address (this test's client is one): the address is
  // the X-Forwarded-For entry the proxy appended, the last. Before, the first entry was taken as
  // is, so a client that wrote another one each time was never limited, and each attempt cost a
  // scrypt hash (128 MiB, a few hundred ms) of the threads that every team's file work shares.
  it("counts the address the proxy saw, whatever the client writes in front of it or in our header", async () => {
    const world = await ownWorld("addresses", { app: { SIGNIN_ATTEMPTS_PER_ADDRESS: "3" } });
    try {
      const url = world.app.url;
      const from = (proxied: string, i: number) => ({
        "x-forwarded-for": `198.51.100.${i}, ${proxied}`,
        "x-lmp-client-address": `192.0.2.${i}`,
      });
      const signUp = (i: number, proxied: string) =>
        fetch(`${url}/api/ui/sign-up`, {
          method: "POST",
          headers: { "content-type": "application/json", ...from(proxied, i) },
          body: JSON.stringify({ email: email(), password: PASSWORD }),
        });
      for (let i = 0; i < 3; i++) expect((await signUp(i, "203.0.113.7")).status).toBe(201);
      const refused = await signUp(3, "203.0.113.7");
      expect(refused.status).toBe(429);
      expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(
        /^Too many sign-ups and sign-ins from this address/,
      );
      // Sign-ins from there are refused too (the same attempts); another address is not.
      const signIn = async (proxied: string) =>
        (await signInAttempt("nobody@example.com", "x", { url, headers: from(proxied, 9) })).error;
      expect(await signIn("203.0.113.7")).toMatch(/Too many sign-in attempts/);
      expect(await signIn("203.0.113.8")).toBe("CredentialsSignin");
      expect((await signUp(4, "203.0.113.8")).status).toBe(201);
    } finally {
      await world.close();
    }
  }, 120_000);
});
