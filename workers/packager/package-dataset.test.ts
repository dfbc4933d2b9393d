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
});
