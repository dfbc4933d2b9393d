import { mkdtempSync, readdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "drizzle-orm";
import { LocalBlobStore } from "@/lib/blob";
import { samples } from "@/lib/db/schema";
import { startFeedWorld } from "@/lib/db/throwaway";
import { newId } from "@/lib/ids";
import { claimDataset } from "@/lib/services/dataset-jobs";
import { createDataset } from "@/lib/services/datasets";
import { createPipeline } from "@/lib/services/pipelines";
import { createTeam } from "@/lib/services/teams";
import { packageDataset } from "./package-dataset";
import { PackagingError } from "./errors";

let world: Awaited<ReturnType<typeof startFeedWorld>>;
beforeAll(async () => {
  world = await startFeedWorld("packaging");
}, 60_000);
afterAll(() => world?.close());

/** A local store whose uploads of keys matching `failing` fail once their body has been read. */
class FailingStore extends LocalBlobStore {
  constructor(
    root: string,
    private failing: RegExp,
  ) {
    super(root);
  }
  override async put(key: string, body: AsyncIterable<Uint8Array>, options?: Parameters<LocalBlobStore["put"]>[2]) {
    if (!this.failing.test(key)) return super.put(key, body, options);
    for await (const _ of body) void _;
    // Let the other file of the split finish first.
    await new Promise((r) => setTimeout(r, 200));
    throw new Error("the store refused it");
  }
}

describe("packageDataset", () => {
  it("removes the files of a failed attempt: the split file that was written before the other failed", async () => {
    const { db } = world.app;
    await db.execute(sql`update datasets set deleted_at = now() where deleted_at is null`); // the claim takes ours
    const team = await createTeam(db, { slug: `t-${Math.random().toString(36).slice(2, 10)}` });
    const pipeline = await createPipeline(db, { teamId: team.id, name: "p" });
    await db.insert(samples).values(
      Array.from({ length: 50 }, (_, i) => ({
        id: newId("sample"),
        pipelineId: pipeline.id,
        teamId: team.id,
        messages: [{ role: "user" as const, content: `m${i}` }],
        length: 1,
      })),
    );
    const d = await createDataset(db, {
      teamId: team.id,
      pipelineId: pipeline.id,
      name: "split",
      selection: {},
      options: { format: "jsonl", compression: "none", dedupe: false, split: { validation: 0.2, seed: 1 } },
    });
    const job = (await claimDataset(db, { owner: "w1", leaseSeconds: 60 }))!;
    expect(job.id).toBe(d.id);
    const root = mkdtempSync(path.join(os.tmpdir(), "blobs-"));
    const store = new FailingStore(root, /validation/);
    await expect(
      packageDataset(job, { db, blobs: store, owner: "w1", leaseSeconds: 60, scratchDir: root }),
    ).rejects.toBeInstanceOf(PackagingError);
    const files = readdirSync(root, { recursive: true, withFileTypes: true }).filter((e) => e.isFile());
    expect(files.map((f) => f.name)).toEqual([]);
  });

  it("stopped while Postgres has not sent a row yet, gives up at once and cancels the COPY", async () => {
    const { db } = world.app;
    await db.execute(sql`update datasets set deleted_at = now() where deleted_at is null`);
    const team = await createTeam(db, { slug: `t-${Math.random().toString(36).slice(2, 10)}` });
    const pipeline = await createPipeline(db, { teamId: team.id, name: "p" });
    await db.insert(samples).values(
      Array.from({ length: 20 }, (_, i) => ({
        id: newId("sample"),
        pipelineId: pipeline.id,
        teamId: team.id,
        messages: [{ role: "user" as const, content: `m${i}` }],
        length: 1,
      })),
    );
    await createDataset(db, { teamId: team.id, pipelineId: pipeline.id, name: "held", selection: {} });
    const job = (await claimDataset(db, { owner: "w2", leaseSeconds: 60 }))!;
    const root = mkdtempSync(path.join(os.tmpdir(), "blobs-"));
    // Another session holds the samples table: the COPY waits on its lock and sends nothing.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holder = db.transaction(async (tx) => {
      await tx.execute(sql`lock table samples in access exclusive mode`);
      locked();
      await held;
    });
    await isLocked;
    const shutdown = new AbortController();
    const packaging = packageDataset(job, {
      db,
      blobs: new LocalBlobStore(root),
      owner: "w2",
      leaseSeconds: 60,
      scratchDir: root,
      signal: shutdown.signal,
    }).then(
      () => "returned",
      () => "threw",
    );
    const waiting = async () =>
      (
        await db.execute<{ n: number }>(
          sql`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query ~* '^\\s*copy'`,
        )
      )[0]!.n;
    await expect.poll(waiting, { timeout: 10_000 }).toBe(1);
    shutdown.abort(new Error("shutting down"));
    // Settled while the lock is still held: it did not wait for the rows.
    const outcome = await Promise.race([packaging, new Promise((r) => setTimeout(() => r("still waiting"), 10_000))]);
    expect(outcome).toBe("threw");
    expect(await waiting()).toBe(0);
    // The pool goes on, the lock still held: the connection came back to it usable.
    for (let i = 0; i < 12; i++) expect((await db.execute<{ one: number }>(sql`select 1 as one`))[0]!.one).toBe(1);
    release();
    await holder;
  });
});
