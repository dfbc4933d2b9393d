import type postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFeedWorld } from "../db/throwaway";
import { connect, type DbHandle } from "../db/client";
import type { ApiError } from "../errors";
import { createApiKey } from "./api-keys";
import { KeyWatch, keyWatchOf, memberWatchOf } from "./key-watch";
import { createTeam } from "./teams";
import { insertUser } from "./users";

let world: Awaited<ReturnType<typeof startFeedWorld>>;
let app: DbHandle; // an app process's pool, with its change feed
let plain: DbHandle; // a pool without one
let other: postgres.Sql; // another process (the CLI, the dashboard's server)

beforeAll(async () => {
  world = await startFeedWorld("keywatch");
  ({ app, other } = world);
  plain = connect(world.url);
}, 60_000);

afterAll(async () => {
  await plain?.close();
  await world?.close();
});

async function newKey(kind: "api" | "model" = "api") {
  const team = await createTeam(app.db, { slug: `t-${Math.random().toString(36).slice(2, 10)}` });
  return (await createApiKey(app.db, { teamId: team.id, kind })).key;
}

/** Watches `keyId`; `revoked` holds the errors its callback got. */
function watching(
  watch: KeyWatch,
  keyId: string,
  what: "API key" | "model key" = "API key",
  since = performance.now(),
) {
  const revoked: ApiError[] = [];
  const unwatch = watch.watch(keyId, what, since, (e) => revoked.push(e));
  return { revoked, unwatch };
}

describe("KeyWatch", () => {
  it("tells a watcher within 100 ms of a revoke by another process, with the 401, and no one else", async () => {
    const watch = keyWatchOf(app.sql);
    const [a, b] = [await newKey("model"), await newKey()];
    const wa = watching(watch, a.id, "model key");
    const wb = watching(watch, b.id);
    await watch.check(); // the first watch checks at once (the watch was new); let it settle
    expect(wa.revoked).toEqual([]);

    await other`update api_keys set revoked_at = now() where id = ${a.id}`;
    const t = performance.now();
    await expect.poll(() => wa.revoked.length, { timeout: 2_000, interval: 2 }).toBe(1);
    expect(performance.now() - t).toBeLessThan(100);
    expect(wa.revoked[0]).toMatchObject({
      status: 401,
      type: "unauthorized",
      message: "This model key has been revoked.",
    });
    await watch.check();
    expect(wb.revoked).toEqual([]);
    expect(wa.revoked).toHaveLength(1); // once
    wb.unwatch();
  });

  it("counts a deleted key, or a deleted team, as revoked", async () => {
    const watch = keyWatchOf(app.sql);
    const [a, b] = [await newKey(), await newKey()];
    const wa = watching(watch, a.id);
    const wb = watching(watch, b.id);
    await other`delete from api_keys where id = ${a.id}`;
    await other`delete from teams where id = ${b.teamId}`;
    await expect.poll(() => [wa.revoked.length, wb.revoked.length], { timeout: 2_000 }).toEqual([1, 1]);
  });

  it("checks at once a key whose revoke was seen after its request's authentication began", async () => {
    const watch = keyWatchOf(app.sql);
    const k = await newKey();
    const keep = watching(watch, (await newKey()).id); // the watch is in use
    await watch.check();
    const since = performance.now(); // the request authenticates: the key is still valid
    await other`update api_keys set revoked_at = now() where id = ${k.id}`;
    await new Promise((r) => setTimeout(r, 200)); // the notification came and went: nobody watched k
    const late = watching(watch, k.id, "API key", since);
    await expect.poll(() => late.revoked.length, { timeout: 1_000 }).toBe(1);
    keep.unwatch();
  });

  it("without a change feed, polls", async () => {
    const watch = new KeyWatch(plain.sql, undefined, 50);
    const k = await newKey();
    const w = watching(watch, k.id);
    await watch.check();
    await other`update api_keys set revoked_at = now() where id = ${k.id}`;
    await expect.poll(() => w.revoked.length, { timeout: 1_000 }).toBe(1);
  });

  it("tells nothing after the unwatch", async () => {
    const watch = new KeyWatch(plain.sql, undefined, 20);
    const k = await newKey();
    const w = watching(watch, k.id);
    await watch.check();
    w.unwatch();
    await other`update api_keys set revoked_at = now() where id = ${k.id}`;
    await new Promise((r) => setTimeout(r, 100));
    await watch.check();
    expect(w.revoked).toEqual([]);
  });
});

describe("MemberWatch", () => {
  async function member(teamId: string, role: "owner" | "member" = "member") {
    const email = `m-${Math.random().toString(36).slice(2, 10)}@example.com`;
    return insertUser(app.db, { email, name: null, passwordHash: "unused" }, { teamId, role });
  }

  it("tells a removed member's watcher within 100 ms, with the 403, and not the team's other members", async () => {
    const watch = memberWatchOf(app.sql);
    const team = await createTeam(app.db, { slug: `t-${Math.random().toString(36).slice(2, 10)}` });
    const [gone, stays] = [await member(team.id), await member(team.id, "owner")];
    const errors: Record<string, ApiError[]> = { gone: [], stays: [] };
    const unwatchGone = watch.watch({ userId: gone.id, teamId: team.id }, performance.now(), (e) =>
      errors.gone!.push(e),
    );
    const unwatchStays = watch.watch({ userId: stays.id, teamId: team.id }, performance.now(), (e) =>
      errors.stays!.push(e),
    );
    await watch.check();
    // A change of role keeps the member in the team: nothing to end.
    await other`update memberships set role = 'owner' where user_id = ${gone.id}`;
    await new Promise((r) => setTimeout(r, 100));
    expect(errors.gone).toEqual([]);

    await other`delete from memberships where user_id = ${gone.id} and team_id = ${team.id}`;
    const t = performance.now();
    await expect.poll(() => errors.gone!.length, { timeout: 2_000, interval: 2 }).toBe(1);
    expect(performance.now() - t).toBeLessThan(100);
    expect(errors.gone![0]).toMatchObject({ status: 403, type: "forbidden" });
    await watch.check();
    expect(errors.stays).toEqual([]);
    unwatchGone();
    unwatchStays();
  });

  it("counts a deleted team as a removal", async () => {
    const watch = memberWatchOf(app.sql);
    const team = await createTeam(app.db, { slug: `t-${Math.random().toString(36).slice(2, 10)}` });
    const m = await member(team.id);
    const errors: ApiError[] = [];
    watch.watch({ userId: m.id, teamId: team.id }, performance.now(), (e) => errors.push(e));
    await watch.check();
    await other`delete from teams where id = ${team.id}`;
    await expect.poll(() => errors.length, { timeout: 2_000 }).toBe(1);
  });
});
