import type postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFeedWorld } from "./throwaway";
import type { DbHandle } from "./client";
import { changeFeedOf } from "./change-feed";
import { authenticateKey, createApiKey, revokeApiKey } from "../services/api-keys";
import { createTeam } from "../services/teams";

let world: Awaited<ReturnType<typeof startFeedWorld>>;
let app: DbHandle; // an app process's pool, with its change feed
let other: postgres.Sql; // another process (the CLI, psql)

beforeAll(async () => {
  world = await startFeedWorld("feed");
  ({ app, other } = world);
}, 60_000);

afterAll(() => world?.close());

async function newKey() {
  const team = await createTeam(app.db, { slug: `t-${Math.random().toString(36).slice(2, 10)}` });
  const { key, secret } = await createApiKey(app.db, { teamId: team.id, kind: "api" });
  return { key, secret, auth: `Bearer ${secret}` };
}

describe("change feed", () => {
  it("serves a key from the cache, and drops it within 100 ms of a revoke by another process", async () => {
    const k = await newKey();
    await authenticateKey(app.db, k.auth, "api");
    // last_used_at is not a column the cache watches: a lookup that reached the database would see it.
    await other`update api_keys set last_used_at = '2001-01-01Z' where id = ${k.key.id}`;
    const cached = await authenticateKey(app.db, k.auth, "api");
    expect(cached.key.lastUsedAt?.getUTCFullYear()).not.toBe(2001);

    await other`update api_keys set revoked_at = now() where id = ${k.key.id}`;
    const revokedAt = performance.now();
    await expect
      .poll(
        () =>
          authenticateKey(app.db, k.auth, "api").then(
            () => "ok",
            (e: Error) => e.message,
          ),
        {
          interval: 2,
          timeout: 2_000,
        },
      )
      .toMatch(/revoked/);
    expect(performance.now() - revokedAt).toBeLessThan(100);
  });

  it("sees a revoke made in this process on the very next lookup", async () => {
    const k = await newKey();
    await authenticateKey(app.db, k.auth, "api");
    await revokeApiKey(app.db, { id: k.key.id });
    await expect(authenticateKey(app.db, k.auth, "api")).rejects.toThrow(/revoked/);
  });

  it("stops caching while its connection is down, so a change made meanwhile is never missed", async () => {
    const k = await newKey();
    await authenticateKey(app.db, k.auth, "api"); // cached
    const feed = changeFeedOf(app.sql)!;
    await other`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'lmplatform-cache'`;
    await expect.poll(() => feed.listening, { interval: 1 }).toBe(false);
    // While the feed reconnects (or after it has): the revoke holds either way.
    await other`update api_keys set revoked_at = now() where id = ${k.key.id}`;
    await expect(authenticateKey(app.db, k.auth, "api")).rejects.toThrow(/revoked/);
    await expect.poll(() => feed.listening, { timeout: 10_000 }).toBe(true);
    await expect(authenticateKey(app.db, k.auth, "api")).rejects.toThrow(/revoked/);
  });

  it("past its size, drops the least recently used entry, not the entries in use", async () => {
    const cache = changeFeedOf(app.sql)!.cache<string, string>("lru-test", {
      tables: [],
      ttlMs: 60_000,
      maxEntries: 3,
    });
    let loads = 0;
    const get = (key: string) => cache.get(key, async () => (loads++, `v-${key}`));
    await get("hot");
    // A flood of keys seen once each (misses), the hot key used in between.
    for (let i = 0; i < 10; i++) {
      expect(await get("hot")).toBe("v-hot");
      await get(`miss-${i}`);
    }
    expect(loads).toBe(11); // the hot key loaded once, each miss once
    // The least recently used went: miss-9 and miss-8 stayed, miss-7 did not.
    loads = 0;
    await get("miss-9");
    await get("miss-8");
    expect(loads).toBe(0);
    await get("miss-7");
    expect(loads).toBe(1);
  });
});
