import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFeedWorld } from "../db/throwaway";
import { serviceHealth } from "./health";

let world: Awaited<ReturnType<typeof startFeedWorld>>;
beforeAll(async () => {
  world = await startFeedWorld("health");
}, 60_000);
afterAll(() => world?.close());

describe("serviceHealth", () => {
  it("is not ready (503's status) while the database's migrations are behind the app's", async () => {
    // An upgrade in progress: the newest migration not applied yet.
    const [last] = await world.other<{ id: number; hash: string; created_at: string }[]>`
      delete from drizzle.__drizzle_migrations
      where id = (select max(id) from drizzle.__drizzle_migrations) returning id, hash, created_at`;
    expect((await serviceHealth(world.app.db, { models: false })).status).toBe("migrating");
    const behind = await serviceHealth(world.app.db, { models: true }); // an operator sees how far
    expect(behind.status).toBe("migrating");
    const { applied, expected } = behind.database.migrations!;
    expect(applied).toBe(expected - 1);

    await world.other`insert into drizzle.__drizzle_migrations (id, hash, created_at)
      values (${last!.id}, ${last!.hash}, ${last!.created_at})`;
    const current = await serviceHealth(world.app.db, { models: false });
    expect(current.status).toBe("degraded"); // ready; no worker in this world
    expect(current.database).toMatchObject({ ok: true });
    expect(current.database.migrations).toBeUndefined();
  });
});
