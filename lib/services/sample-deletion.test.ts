import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { datasets, samples } from "../db/schema";
import { startFeedWorld } from "../db/throwaway";
import { newId } from "../ids";
import { claimDataset } from "./dataset-jobs";
import { createDataset } from "./datasets";
import { applyRetention } from "./maintenance";
import { createPipeline } from "./pipelines";
import { deleteSample, DELETION_RESTARTS } from "./sample-deletion";
import { addSample, mergeSampleMetadata } from "./samples";
import { createTeam } from "./teams";

let world: Awaited<ReturnType<typeof startFeedWorld>>;
beforeAll(async () => {
  world = await startFeedWorld("deletion");
}, 60_000);
afterAll(() => world?.close());

/** A pipeline whose first sample is 3 days old and the rest fresh, with a dataset a worker is packaging. */
async function packaging(retentionDays: number | null, count = 3) {
  const { db } = world.app;
  await db.execute(sql`update datasets set deleted_at = now() where deleted_at is null`); // the claim takes ours
  const team = await createTeam(db, { slug: `t-${Math.random().toString(36).slice(2, 10)}` });
  const pipeline = await createPipeline(db, { teamId: team.id, name: "p" });
  const ids = Array.from({ length: count }, () => newId("sample"));
  const day = 24 * 3600 * 1000;
  await db.insert(samples).values(
    ids.map((id, i) => ({
      id,
      pipelineId: pipeline.id,
      teamId: team.id,
      messages: [{ role: "user" as const, content: `m${i}` }],
      length: 1,
      createdAt: new Date(Date.now() - (i === 0 ? 3 * day : 0) + i),
    })),
  );
  const d = await createDataset(db, { teamId: team.id, pipelineId: pipeline.id, name: "d", selection: {} });
  const job = await claimDataset(db, { owner: "worker-1", leaseSeconds: 60 });
  expect(job?.id).toBe(d.id);
  await db.execute(sql`update datasets set progress = 2 where id = ${d.id}`);
  if (retentionDays !== null)
    await db.execute(sql`update pipelines set retention_days = ${retentionDays} where id = ${pipeline.id}`);
  const row = async () => (await db.select().from(datasets).where(eq(datasets.id, d.id)))[0]!;
  return { team, ids, row };
}

describe("a dataset being packaged when samples it may hold are deleted", () => {
  it("by the team (a sample, a selection): goes back to the queue, its worker's lease dropped", async () => {
    const { team, ids, row } = await packaging(null);
    await deleteSample(world.app.db, { teamId: team.id, id: ids[0]! });
    expect(await row()).toMatchObject({ status: "PROCESSING", leaseOwner: null, progress: 0, attempts: 0 });
  });

  it(`by the team, again and again: starts over ${DELETION_RESTARTS} times, then goes on, marked`, async () => {
    const { db } = world.app;
    const { team, ids, row } = await packaging(null, DELETION_RESTARTS + 2);
    for (let i = 0; i < DELETION_RESTARTS; i++) {
      await deleteSample(db, { teamId: team.id, id: ids[i]! });
      expect(await row()).toMatchObject({ leaseOwner: null, progress: 0, restarts: i + 1 });
      // A worker takes it again and gets on with it.
      expect((await claimDataset(db, { owner: "worker-1", leaseSeconds: 60 }))?.id).toBe((await row()).id);
      await db.execute(sql`update datasets set progress = 2 where id = ${(await row()).id}`);
    }
    // Before: a fourth, fifth… restart for every deletion, never READY and never FAILED.
    await deleteSample(db, { teamId: team.id, id: ids[DELETION_RESTARTS]! });
    expect(await row()).toMatchObject({
      status: "PROCESSING",
      leaseOwner: "worker-1",
      progress: 2,
      restarts: DELETION_RESTARTS,
      containsDeletedSamples: true,
    });
  });

  it("queued (no worker on it): nothing to start over, nothing counted, not marked", async () => {
    const { db } = world.app;
    const { team, ids, row } = await packaging(null, DELETION_RESTARTS + 2);
    await db.execute(sql`update datasets set lease_owner = null, lease_expires_at = now() + interval '30 seconds'
      where id = ${(await row()).id}`);
    const waitingUntil = (await row()).leaseExpiresAt;
    for (let i = 0; i < DELETION_RESTARTS + 1; i++) await deleteSample(db, { teamId: team.id, id: ids[i]! });
    // Before: each deletion counted a restart (the fourth marked a file that will not hold the
    // samples) and dropped the retry's wait.
    expect(await row()).toMatchObject({ restarts: 0, containsDeletedSamples: false, leaseExpiresAt: waitingUntil });
  });

  it("by retention: goes on, marked as holding deleted samples (samples age out every run)", async () => {
    const { row } = await packaging(2);
    expect(await applyRetention(world.app.db)).toBeGreaterThanOrEqual(1);
    expect(await row()).toMatchObject({
      status: "PROCESSING",
      leaseOwner: "worker-1",
      progress: 2,
      attempts: 1,
      containsDeletedSamples: true,
    });
  });
});

describe("a sample deleted while its metadata is being changed", () => {
  it("goes with every label, the new ones too: no label is left without its sample", async () => {
    const { db } = world.app;
    const team = await createTeam(db, { slug: `t-${Math.random().toString(36).slice(2, 10)}` });
    const pipeline = await createPipeline(db, { teamId: team.id, name: "p" });
    const { id } = await addSample(db, {
      teamId: team.id,
      pipelineId: pipeline.id,
      sample: {
        messages: [{ role: "user", content: "hi" }],
        metadata: { lang: "en" },
        userId: undefined,
        groupId: undefined,
      },
    });
    // A PATCH holds the sample's row while the deletion comes; it commits a new label, then the
    // deletion goes on (with the row as the PATCH left it).
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const patching = db.transaction(async (tx) => {
      await mergeSampleMetadata(tx, { teamId: team.id, id, metadata: { rating: "5" } });
      await gate;
    });
    await new Promise((r) => setTimeout(r, 200));
    const deleting = deleteSample(db, { teamId: team.id, id });
    await new Promise((r) => setTimeout(r, 300));
    release();
    await patching;
    expect(await deleting).toBe(1);
    const [left] = await db.execute<{ n: number }>(
      sql`select count(*)::int as n from sample_labels where pipeline_id = ${pipeline.id}`,
    );
    expect(left!.n).toBe(0);
  });
});
