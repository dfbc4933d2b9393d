import { existsSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalBlobStore } from "../blob";
import { datasets } from "../db/schema";
import { startFeedWorld } from "../db/throwaway";
import { createDataset, datasetBlobPrefix, deleteDataset, sweepDeletedDatasetFiles } from "./datasets";
import { createPipeline } from "./pipelines";
import { createTeam } from "./teams";

let world: Awaited<ReturnType<typeof startFeedWorld>>;
let root: string;
beforeAll(async () => {
  world = await startFeedWorld("datasets");
  root = mkdtempSync(path.join(os.tmpdir(), "lmp-datasets-"));
}, 60_000);
afterAll(async () => {
  await world?.close();
  rmSync(root, { recursive: true, force: true });
});

/** A blob store whose removals fail while `down` is set (S3 unreachable). */
class FlakyStore extends LocalBlobStore {
  down = false;
  override async removePrefix(prefix: string): Promise<void> {
    if (this.down) throw new Error("the blob store is unreachable");
    return super.removePrefix(prefix);
  }
}

describe("deleting a dataset while the blob store fails", () => {
  it("deletes it all the same; the workers' maintenance removes its files later", async () => {
    const { db } = world.app;
    const blobs = new FlakyStore(root);
    const team = await createTeam(db, { slug: `t-${Math.random().toString(36).slice(2, 10)}` });
    const pipeline = await createPipeline(db, { teamId: team.id, name: "p" });
    const d = await createDataset(db, { teamId: team.id, pipelineId: pipeline.id, name: "d", selection: {} });
    const key = `${datasetBlobPrefix(d.id)}d.jsonl`;
    await blobs.put(
      key,
      (async function* () {
        yield Buffer.from("{}\n");
      })(),
    );
    await db.execute(sql`update datasets set status = 'READY', blob_key = ${key} where id = ${d.id}`);
    const file = path.join(root, key);
    expect(existsSync(file)).toBe(true);

    blobs.down = true;
    // Before: a 500 for a delete that had been done, and the file kept for good.
    expect(await deleteDataset(db, blobs, { teamId: team.id, id: d.id })).toMatchObject({ id: d.id });
    await expect(deleteDataset(db, blobs, { teamId: team.id, id: d.id })).rejects.toMatchObject({ status: 404 });
    expect(existsSync(file)).toBe(true);
    expect(await sweepDeletedDatasetFiles(db, blobs)).toBe(0); // still down: tried again at the next run

    blobs.down = false;
    expect(await sweepDeletedDatasetFiles(db, blobs)).toBe(1);
    expect(existsSync(file)).toBe(false);
    const [row] = await db.select().from(datasets).where(eq(datasets.id, d.id));
    expect(row).toMatchObject({ blobKey: null, files: [] });
    expect(await sweepDeletedDatasetFiles(db, blobs)).toBe(0); // nothing left to do
  });
});
