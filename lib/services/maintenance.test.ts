import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { samples } from "../db/schema";
import { startFeedWorld } from "../db/throwaway";
import { newId } from "../ids";
import { applyRetention, sweepGoneWorkers, sweepIdempotencyKeys } from "./maintenance";
import { createPipeline } from "./pipelines";
import { createTeam } from "./teams";

let world: Awaited<ReturnType<typeof startFeedWorld>>;
beforeAll(async () => {
  world = await startFeedWorld("maintenance");
}, 60_000);
afterAll(() => world?.close());

const newTeam = () => createTeam(world.app.db, { slug: `t-${Math.random().toString(36).slice(2, 10)}` });

describe("maintenance", () => {
  it("sweeps expired idempotency keys in batches, and only those", async () => {
    const team = await newTeam();
    const row = (i: number, hoursAgo: number) =>
      sql`(${team.id}, ${`k${i}`}, 'h', now() - make_interval(hours => ${hoursAgo}))`;
    const rows = [...Array.from({ length: 25 }, (_, i) => row(i, 25)), row(100, 1), row(101, 2), row(102, 23)];
    await world.app.db.execute(
      sql`insert into idempotency_keys (team_id, key, request_hash, created_at) values ${sql.join(rows, sql`, `)}`,
    );
    expect(await sweepIdempotencyKeys(world.app.db, 10)).toBe(25);
    const left = await world.other<
      { key: string }[]
    >`select key from idempotency_keys where team_id = ${team.id} order by key`;
    expect(left.map((r) => r.key)).toEqual(["k100", "k101", "k102"]);
  });

  it("deletes the rows of workers gone for an hour, never a live one's", async () => {
    const db = world.app.db;
    const row = (id: string, minutesAgo: number) =>
      sql`(${id}, 'host', 1, now() - make_interval(mins => ${minutesAgo}))`;
    await db.execute(
      sql`insert into workers (id, hostname, pid, heartbeat_at) values ${sql.join(
        [row("wrk_live", 0), row("wrk_recent", 30), row("wrk_gone1", 61), row("wrk_gone2", 60 * 24)],
        sql`, `,
      )}`,
    );
    expect(await sweepGoneWorkers(db)).toBe(2);
    const left = await world.other<{ id: string }[]>`select id from workers order by id`;
    expect(left.map((r) => r.id)).toEqual(["wrk_live", "wrk_recent"]);
  });

  it("stops retention between batches once the worker stops, and takes it up at the next run", async () => {
    const team = await newTeam();
    const pipeline = await createPipeline(world.app.db, { teamId: team.id, name: "p" });
    const day = 24 * 3600_000;
    await world.app.db.insert(samples).values(
      Array.from({ length: 5 }, (_, i) => ({
        id: newId("sample"),
        pipelineId: pipeline.id,
        teamId: team.id,
        messages: [{ role: "user" as const, content: `m${i}` }],
        length: 1,
        createdAt: new Date(Date.now() - 3 * day + i),
      })),
    );
    await world.other`update pipelines set retention_days = 1 where id = ${pipeline.id}`;
    const stopped = new AbortController();
    stopped.abort();
    expect(await applyRetention(world.app.db, 2, stopped.signal)).toBe(0);
    const count = async () =>
      (
        await world.other<{ n: number }[]>`select count(*)::int as n from samples where pipeline_id = ${pipeline.id}`
      )[0]!.n;
    expect(await count()).toBe(5);
    expect(await applyRetention(world.app.db, 2)).toBeGreaterThanOrEqual(5);
    expect(await count()).toBe(0);
  });
});
