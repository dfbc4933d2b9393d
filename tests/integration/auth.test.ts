import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { apiKeys } from "@/lib/db/schema";
import { revokeApiKey } from "@/lib/services/api-keys";
import { setUserPassword } from "@/lib/services/users";
import { baseUrl, client, db, makeTeam } from "../helpers/context";
import { as, newUser, signIn } from "../helpers/session";

const ErrorShape = (type: string) => ({ error: expect.objectContaining({ type, message: expect.any(String) }) });

describe("API key authentication", () => {
  it("rejects a missing key with 401 and the error body", async () => {
    const res = await client().get("/v1/pipelines/list");
    expect(res.status).toBe(401);
    expect(res.json).toEqual(ErrorShape("unauthorized"));
    expect(res.json.error.message).toMatch(/Authorization: Bearer/);
  });

  it("rejects a malformed Authorization header", async () => {
    for (const header of ["Basic abc", "Bearer", "Bearer a b", "lmp_sk_x"]) {
      const res = await client().get("/v1/pipelines/list", { authorization: header });
      expect(res.status, header).toBe(401);
      expect(res.json).toEqual(ErrorShape("unauthorized"));
    }
  });

  it("rejects an unknown key of the right shape", async () => {
    const res = await client("lmp_sk_" + "A".repeat(43)).get("/v1/pipelines/list");
    expect(res.status).toBe(401);
    expect(res.json.error.message).toBe("Invalid API key.");
  });

  it("does not take a model key as an API key", async () => {
    const team = await makeTeam();
    const res = await client(team.modelKey).get("/v1/pipelines/list");
    expect(res.status).toBe(401);
    expect(res.json.error.message).toMatch(/model key/);
  });

  it("accepts a valid key and records last_used_at", async () => {
    const team = await makeTeam();
    const before = await db().db.select().from(apiKeys).where(eq(apiKeys.id, team.keyId));
    expect(before[0]!.lastUsedAt).toBeNull();
    const res = await client(team.apiKey).get("/v1/pipelines/list");
    expect(res.status).toBe(200);
    expect(res.json).toEqual([]);
    await expect
      .poll(async () => (await db().db.select().from(apiKeys).where(eq(apiKeys.id, team.keyId)))[0]!.lastUsedAt)
      .not.toBeNull();
  });

  it("answers each of many concurrent requests for its own key (lookups are batched)", async () => {
    const [a, b] = [await makeTeam(), await makeTeam()];
    await client(a.apiKey).post("/v1/pipelines/create", { name: "a-only" });
    const revoked = await makeTeam();
    await revokeApiKey(db().db, { id: revoked.keyId });
    const keys = [a.apiKey, b.apiKey, revoked.apiKey, "lmp_sk_" + "B".repeat(43), a.modelKey];
    const calls = Array.from({ length: 60 }, (_, i) => keys[i % keys.length]!);
    const results = await Promise.all(calls.map((k) => client(k).get("/v1/pipelines/list")));
    results.forEach((res, i) => {
      const key = calls[i];
      if (key === a.apiKey)
        expect(
          res.json.map((p: { name: string }) => p.name),
          `call ${i}`,
        ).toEqual(["a-only"]);
      else if (key === b.apiKey) expect(res.json, `call ${i}`).toEqual([]);
      else expect(res.status, `call ${i}`).toBe(401);
    });
    expect(results.filter((r) => r.status === 401 && /revoked/.test(r.json.error.message))).toHaveLength(12);
  });

  it("rejects a key within 100 ms of a revoke made by another process, though the app caches keys", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    // Used twice first: the app now holds the key in its cache.
    expect((await api.get("/v1/pipelines/list")).status).toBe(200);
    expect((await api.get("/v1/pipelines/list")).status).toBe(200);
    await revokeApiKey(db().db, { id: team.keyId, teamId: team.id }); // this test process, not the app
    const revokedAt = performance.now();
    let res = await api.get("/v1/pipelines/list");
    while (res.status === 200 && performance.now() - revokedAt < 2_000) res = await api.get("/v1/pipelines/list");
    expect(performance.now() - revokedAt).toBeLessThan(100);
    expect(res.status).toBe(401);
    expect(res.json.error.message).toMatch(/revoked/);
  });

  it("rejects a key revoked from the dashboard on the very next request", async () => {
    const { cookie } = await newUser();
    const created = await as(cookie).post("/api/ui/keys", { kind: "api", name: "soon revoked" });
    expect(created.status).toBe(201);
    const api = client(created.json.secret);
    expect((await api.get("/v1/pipelines/list")).status).toBe(200);
    expect((await api.get("/v1/pipelines/list")).status).toBe(200);
    expect((await as(cookie).post(`/api/ui/keys/${created.json.key.id}/revoke`)).status).toBe(200);
    const res = await api.get("/v1/pipelines/list");
    expect(res.status).toBe(401);
  });

  it("answers unknown /v1 paths with the JSON error body", async () => {
    const res = await client().get("/v1/nope");
    expect(res.status).toBe(404);
    expect(res.json).toEqual(ErrorShape("not_found"));
  });
});

describe("dashboard sessions", () => {
  it("are all signed out when the password is set; a new sign-in with the new password works", async () => {
    const { cookie, email } = await newUser();
    const other = await newUser();
    expect((await as(cookie).get("/api/ui/keys")).status).toBe(200);
    await setUserPassword(db().db, { email, password: "a brand new password" });
    const after = await as(cookie).get("/api/ui/keys");
    expect(after.status).toBe(401);
    expect(after.json.error.message).toBe("Sign in to continue.");
    // Pages too: to the sign-in page.
    const page = await fetch(`${baseUrl}/settings/keys`, { headers: { cookie }, redirect: "manual" });
    expect(page.headers.get("location")).toMatch(/\/sign-in\?callbackUrl=/);
    expect((await as(await signIn(email, "a brand new password")).get("/api/ui/keys")).status).toBe(200);
    // Another user's sessions are not touched.
    expect((await as(other.cookie).get("/api/ui/keys")).status).toBe(200);
  });
});
