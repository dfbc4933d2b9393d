import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalBlobStore } from "../blob";
import { eq } from "drizzle-orm";
import { imports, pipelines } from "../db/schema";
import { startFeedWorld } from "../db/throwaway";
import { claimImport, releaseImport, sweepImportFiles } from "./import-jobs";
import { createImport } from "./imports";
import { deletePipeline, purgeDeletedPipelines } from "./maintenance";
import { createPipeline } from "./pipelines";
import { createTeam } from "./teams";

let world: Awaited<ReturnType<typeof startFeedWorld>>;
let root: string;
beforeAll(async () => {
  world = await startFeedWorld("imports");
  root = mkdtempSync(path.join(os.tmpdir(), "lmp-imports-"));
}, 60_000);
afterAll(async () => {
  await world?.close();
  rmSync(root, { recursive: true, force: true });
});

/** A new team's pipeline and an import of one line into it, its file in `blobs`. */
async function oneLineImport(blobs: LocalBlobStore) {
  const { db } = world.app;
  const team = await createTeam(db, { slug: `t-${Math.random().toString(36).slice(2, 10)}` });
  const pipeline = await createPipeline(db, { teamId: team.id, name: "p" });
  const created = await createImport(db, blobs, {
    teamId: team.id,
    pipelineId: pipeline.id,
    body: (async function* () {
      yield Buffer.from('{"messages":[{"role":"user","content":"a"}]}\n');
    })(),
    maxBytes: 1e6,
    maxRunning: 10,
  });
  return { team, pipeline, created };
}

describe("an import whose pipeline is deleted while its file uploads", () => {
  for (const purged of [false, true]) {
    it(`is a 404, its file removed, no import left behind (pipeline ${purged ? "purged" : "deleted"})`, async () => {
      const { db } = world.app;
      const blobs = new LocalBlobStore(path.join(root, String(purged)));
      const team = await createTeam(db, { slug: `t-${Math.random().toString(36).slice(2, 10)}` });
      const pipeline = await createPipeline(db, { teamId: team.id, name: "p" });
      async function* body() {
        yield Buffer.from('{"messages":[{"role":"user","content":"a"}]}\n');
        await deletePipeline(db, blobs, { teamId: team.id, id: pipeline.id });
        if (purged) await purgeDeletedPipelines(db); // the row itself is gone
        yield Buffer.from('{"messages":[{"role":"user","content":"b"}]}\n');
      }
      const input = { teamId: team.id, pipelineId: pipeline.id, body: body(), maxBytes: 1e6, maxRunning: 10 };
      // Before: a PROCESSING import of a deleted pipeline, or (purged) a 500 from the foreign key.
      await expect(createImport(db, blobs, input)).rejects.toMatchObject({ status: 404, param: "id" });
      expect(await db.select().from(imports)).toEqual([]);
      expect(readdirSync(blobs.root, { recursive: true }).filter((f) => String(f).endsWith(".jsonl"))).toEqual([]);
    });
  }
});

/** A blob store whose removals fail while `down` is set (S3 unreachable). */
class FlakyStore extends LocalBlobStore {
  down = false;
  override async removePrefix(prefix: string): Promise<void> {
    if (this.down) throw new Error("the blob store is unreachable");
    return super.removePrefix(prefix);
  }
}

describe("an import's file the blob store could not remove", () => {
  it("does not fail the pipeline's deletion, keeps its purge waiting, and is removed by the maintenance", async () => {
    const { db } = world.app;
    const blobs = new FlakyStore(path.join(root, "flaky"));
    const { team, pipeline, created } = await oneLineImport(blobs);
    const uploaded = () => readdirSync(path.join(root, "flaky", "imports", created.id)).length;
    expect(uploaded()).toBe(1);
    blobs.down = true;
    // Before: a 500 for a deletion that was done, and the file for good once purged.
    await deletePipeline(db, blobs, { teamId: team.id, id: pipeline.id });
    await purgeDeletedPipelines(db);
    expect((await db.select().from(pipelines).where(eq(pipelines.id, pipeline.id))).length).toBe(1);
    expect(await sweepImportFiles(db, blobs)).toBe(0); // still down: tried again at the next run
    blobs.down = false;
    expect(await sweepImportFiles(db, blobs)).toBeGreaterThanOrEqual(1);
    expect(() => uploaded()).toThrow(); // its folder is gone
    await purgeDeletedPipelines(db);
    expect((await db.select().from(pipelines).where(eq(pipelines.id, pipeline.id))).length).toBe(0);
  });
});

describe("an import whose attempt failed", () => {
  it("waits before the next claim; one given back by a stopping worker does not", async () => {
    const { db } = world.app;
    await db.update(imports).set({ status: "READY" }).where(eq(imports.status, "PROCESSING")); // ours is claimed
    const blobs = new LocalBlobStore(path.join(root, "retry"));
    const { created } = await oneLineImport(blobs);
    const claim = () => claimImport(db, { owner: "w", leaseSeconds: 30 });
    expect((await claim())?.id).toBe(created.id);
    await releaseImport(db, { id: created.id, owner: "w", countAttempt: false });
    expect((await claim())?.id).toBe(created.id); // a worker stopping: at once
    await releaseImport(db, { id: created.id, owner: "w", countAttempt: true });
    // Before: claimed again at once, every attempt spent in seconds.
    expect(await claim()).toBeUndefined();
    const [row] = await db.select().from(imports).where(eq(imports.id, created.id));
    expect(row!.leaseOwner).toBeNull();
    expect(row!.leaseExpiresAt!.getTime() - Date.now()).toBeGreaterThan(5_000);
    await db
      .update(imports)
      .set({ leaseExpiresAt: new Date(Date.now() - 1000) })
      .where(eq(imports.id, created.id));
    expect((await claim())?.id).toBe(created.id);
  });
});
