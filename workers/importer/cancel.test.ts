import { existsSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalBlobStore } from "@/lib/blob";
import { DeleteSamplesBody } from "@/lib/contracts/deletion";
import { SelectionBody } from "@/lib/contracts/pipelines";
import { imports } from "@/lib/db/schema";
import { startFeedWorld } from "@/lib/db/throwaway";
import { claimImport } from "@/lib/services/import-jobs";
import { cancelImport, createImport, listImports } from "@/lib/services/imports";
import { createPipeline } from "@/lib/services/pipelines";
import { countSelection } from "@/lib/services/samples";
import { deleteSelection } from "@/lib/services/sample-deletion";
import { createTeam } from "@/lib/services/teams";
import { importFile } from "./import-file";

let world: Awaited<ReturnType<typeof startFeedWorld>>;
let root: string;
beforeAll(async () => {
  world = await startFeedWorld("import_cancel");
  root = mkdtempSync(path.join(os.tmpdir(), "lmp-import-cancel-"));
}, 60_000);
afterAll(async () => {
  await world?.close();
  rmSync(root, { recursive: true, force: true });
});

const line = (i: number) => JSON.stringify({ messages: [{ role: "user", content: `line ${i}` }] }) + "\n";

async function upload(db: typeof world.app.db, blobs: LocalBlobStore, teamId: string, pipelineId: string, n: number) {
  return createImport(db, blobs, {
    teamId,
    pipelineId,
    body: (async function* () {
      for (let i = 1; i <= n; i++) yield Buffer.from(line(i));
    })(),
    maxBytes: 1e8,
    maxRunning: 10,
  });
}

describe("cancelling an import", () => {
  it("stops a worker midway, keeps what it stored (found by importId), removes the file, and is never claimed again", async () => {
    const { db } = world.app;
    const blobs = new LocalBlobStore(path.join(root, "a"));
    const team = await createTeam(db, { slug: `t-${Math.random().toString(36).slice(2, 10)}` });
    const pipeline = await createPipeline(db, { teamId: team.id, name: "p" });
    const other = await upload(db, blobs, team.id, pipeline.id, 0); // another import of the pipeline
    await db.update(imports).set({ status: "READY" }).where(eq(imports.id, other.id));
    const created = await upload(db, blobs, team.id, pipeline.id, 2000);
    const job = (await claimImport(db, { owner: "w1", leaseSeconds: 30 }))!;
    expect(job.id).toBe(created.id);
    // 20 chunks of 100 lines, 100 ms apart: cancelled after the first few.
    const running = importFile(job, {
      db,
      blobs,
      owner: "w1",
      leaseSeconds: 30,
      chunkLines: 100,
      maxLineBytes: 1e6,
      throttleMs: 100,
    });
    await expect
      .poll(async () => (await db.select().from(imports).where(eq(imports.id, created.id)))[0]!.imported, {
        timeout: 20_000,
        interval: 10,
      })
      .toBeGreaterThan(0);
    const cancelled = await cancelImport(db, blobs, { teamId: team.id, id: created.id });
    expect(cancelled.status).toBe("CANCELLED");
    // Before: no way to stop it; the worker stored all 2,000 lines.
    expect(await running).toBe("lost");
    const after = (await db.select().from(imports).where(eq(imports.id, created.id)))[0]!;
    expect(after).toMatchObject({ status: "CANCELLED", leaseOwner: null, fileRemoved: true });
    expect(after.imported).toBeGreaterThan(0);
    expect(after.imported).toBeLessThan(2000);
    expect(existsSync(blobs.pathOf(created.blobKey))).toBe(false);
    // What it stored stays, and the selection's importId finds exactly that.
    const count = (body: object) =>
      countSelection(db, { pipelineId: pipeline.id, selection: SelectionBody.parse(body) });
    expect(await count({ importId: created.id })).toBe(after.imported);
    expect(await count({})).toBe(after.imported);
    expect(await count({ importId: other.id })).toBe(0);
    // Nothing claims it again, a second cancel answers it as it is, a READY one is a 409.
    expect(await claimImport(db, { owner: "w2", leaseSeconds: 30 })).toBeUndefined();
    expect((await cancelImport(db, blobs, { teamId: team.id, id: created.id })).status).toBe("CANCELLED");
    await expect(cancelImport(db, blobs, { teamId: team.id, id: other.id })).rejects.toMatchObject({
      status: 409,
      message: expect.stringMatching(/already READY/),
    });
    // Another team: 404, as for an unknown id; its listing does not show them.
    const stranger = await createTeam(db, { slug: `t-${Math.random().toString(36).slice(2, 10)}` });
    await expect(cancelImport(db, blobs, { teamId: stranger.id, id: created.id })).rejects.toMatchObject({
      status: 404,
    });
    expect(await listImports(db, { teamId: stranger.id, limit: 20 })).toEqual([]);
    // The listing: newest first, by status, in pages.
    const listed = await listImports(db, { teamId: team.id, limit: 20 });
    expect(listed.map((i) => [i.id, i.status])).toEqual([
      [created.id, "CANCELLED"],
      [other.id, "READY"],
    ]);
    expect((await listImports(db, { teamId: team.id, limit: 20, status: "READY" })).map((i) => i.id)).toEqual([
      other.id,
    ]);
    const first = await listImports(db, { teamId: team.id, limit: 1 });
    expect(first.map((i) => i.id)).toEqual([created.id]);
    const next = await listImports(db, { teamId: team.id, limit: 1, before: first[0]!.id });
    expect(next.map((i) => i.id)).toEqual([other.id]);
    expect(await listImports(db, { teamId: team.id, limit: 1, before: other.id })).toEqual([]);
    // Created in the same millisecond (one statement, one now()): paged one by one, none skipped.
    const same = await db.execute<{ id: string }>(sql`
      insert into imports (id, team_id, pipeline_id, blob_key, bytes, status)
      select 'imp_same' || g, ${team.id}, ${pipeline.id}, 'imports/x/upload.jsonl', 0, 'READY' from generate_series(1, 3) g
      returning id`);
    const paged: string[] = [];
    for (let before: string | undefined; ;) {
      const page = await listImports(db, { teamId: team.id, limit: 1, status: "READY", ...(before ? { before } : {}) });
      if (page.length === 0) break;
      paged.push(page[0]!.id);
      before = page[0]!.id;
    }
    // Before: the second and third of them skipped.
    expect(paged).toEqual([
      ...same
        .map((r) => r.id)
        .sort()
        .reverse(),
      other.id,
    ]);
    await expect(listImports(db, { teamId: stranger.id, limit: 1, before: other.id })).rejects.toMatchObject({
      status: 400,
      param: "before",
    });
    await expect(listImports(db, { teamId: stranger.id, limit: 1, pipelineId: pipeline.id })).rejects.toMatchObject({
      status: 404,
    });
    // Deleting what the cancelled import stored.
    const filters = DeleteSamplesBody.parse({ importId: created.id });
    expect(await deleteSelection(db, { pipelineId: pipeline.id, filters, batch: 100 })).toBe(after.imported);
    expect(await count({})).toBe(0);
  }, 60_000);
});
