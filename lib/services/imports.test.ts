import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalBlobStore } from "../blob";
import { imports } from "../db/schema";
import { startFeedWorld } from "../db/throwaway";
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
