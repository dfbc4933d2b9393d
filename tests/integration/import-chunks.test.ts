import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type DbHandle } from "@/lib/db/client";
import { imports, sampleLabels, samples } from "@/lib/db/schema";
import { newId } from "@/lib/ids";
import {
  claimImport,
  ImportLeaseLost,
  ImportPipelineGone,
  storeImportChunk,
  type ImportChunk,
} from "@/lib/services/import-jobs";
import { createPipeline } from "@/lib/services/pipelines";
import { newSampleRow } from "@/lib/services/sample-rows";
import { createTeam } from "@/lib/services/teams";
import { scratchDatabase } from "../helpers/scratch-database";

// storeImportChunk writes a chunk's samples, their labels and the import's progress in one
// statement: all of it while the lease is held and the pipeline is live, none of it otherwise.
// A database of its own: the suite's worker must not claim these imports.

let database: Awaited<ReturnType<typeof scratchDatabase>>;
let handle: DbHandle;

beforeAll(async () => {
  database = await scratchDatabase();
  handle = connect(database.url, { max: 2 });
});
afterAll(async () => {
  await handle?.close();
  await database?.drop();
});

async function claimed() {
  const team = await createTeam(handle.db, { slug: `t-${newId("team").slice(5, 15)}` });
  const pipeline = await createPipeline(handle.db, { teamId: team.id, name: "p" });
  const id = newId("import");
  await handle.db
    .insert(imports)
    .values({ id, teamId: team.id, pipelineId: pipeline.id, blobKey: `imports/${id}/upload.jsonl`, bytes: 1000 });
  const owner = `w-${id}`;
  const job = await claimImport(handle.db, { owner, leaseSeconds: 30 });
  expect(job?.id).toBe(id);
  const chunk = (from: number, n: number, end: number): ImportChunk => ({
    rows: Array.from({ length: n }, (_, i) =>
      newSampleRow(`smp_${id.slice(4)}${from + i}`, pipeline.id, team.id, {
        messages: [{ role: "user", content: `line ${from + i}` }],
        userId: undefined,
        groupId: undefined,
        metadata: { line: String(from + i) },
      }),
    ),
    bytesRead: end,
    linesRead: from + n,
    refused: 1,
    refusals: [{ line: from + n + 1, error: { type: "invalid_request", message: "bad" } }],
  });
  const state = async () => {
    const [row] = await handle.db.select().from(imports).where(eq(imports.id, id));
    const [{ n }] = await handle.db
      .select({ n: sql<number>`count(*)::int` })
      .from(samples)
      .where(eq(samples.pipelineId, pipeline.id));
    const [{ labels }] = await handle.db
      .select({ labels: sql<number>`count(*)::int` })
      .from(sampleLabels)
      .where(eq(sampleLabels.pipelineId, pipeline.id));
    return { ...row!, samples: n, labels };
  };
  return { id, owner, pipeline, team, chunk, state };
}

describe("storeImportChunk", () => {
  it("stores the samples, their labels and the progress together, and never a line twice", async () => {
    const { id, owner, chunk, state } = await claimed();
    expect(await storeImportChunk(handle.db, { id, owner, leaseSeconds: 30, chunk: chunk(0, 3, 300) })).toBe(3);
    expect(await state()).toMatchObject({
      samples: 3,
      labels: 3,
      imported: 3,
      refused: 1,
      linesRead: 3,
      bytesRead: 300,
    });
    expect((await state()).refusals).toHaveLength(1);
    // The same lines again (a worker resuming after a crash): nothing stored twice, progress moves.
    expect(await storeImportChunk(handle.db, { id, owner, leaseSeconds: 30, chunk: chunk(0, 4, 400) })).toBe(1);
    expect(await state()).toMatchObject({
      samples: 4,
      labels: 4,
      imported: 4,
      refused: 2,
      linesRead: 4,
      bytesRead: 400,
    });
    // A chunk of refused lines only moves the progress.
    expect(await storeImportChunk(handle.db, { id, owner, leaseSeconds: 30, chunk: chunk(4, 0, 450) })).toBe(0);
    expect(await state()).toMatchObject({ samples: 4, imported: 4, refused: 3, linesRead: 4, bytesRead: 450 });
  });

  it("writes nothing once the lease is lost", async () => {
    const { id, owner, chunk, state } = await claimed();
    await storeImportChunk(handle.db, { id, owner, leaseSeconds: 30, chunk: chunk(0, 2, 200) });
    const store = storeImportChunk(handle.db, { id, owner: "someone-else", leaseSeconds: 30, chunk: chunk(2, 5, 700) });
    await expect(store).rejects.toBeInstanceOf(ImportLeaseLost);
    await handle.db.update(imports).set({ status: "FAILED" }).where(eq(imports.id, id));
    const ended = storeImportChunk(handle.db, { id, owner, leaseSeconds: 30, chunk: chunk(2, 5, 700) });
    await expect(ended).rejects.toBeInstanceOf(ImportLeaseLost);
    expect(await state()).toMatchObject({
      samples: 2,
      labels: 2,
      imported: 2,
      refused: 1,
      linesRead: 2,
      bytesRead: 200,
    });
  });

  it("writes nothing once the pipeline is deleted", async () => {
    const { id, owner, pipeline, chunk, state } = await claimed();
    await storeImportChunk(handle.db, { id, owner, leaseSeconds: 30, chunk: chunk(0, 2, 200) });
    await handle.db.execute(sql`update pipelines set deleted_at = now() where id = ${pipeline.id}`);
    const store = storeImportChunk(handle.db, { id, owner, leaseSeconds: 30, chunk: chunk(2, 5, 700) });
    await expect(store).rejects.toBeInstanceOf(ImportPipelineGone);
    expect(await state()).toMatchObject({ samples: 2, imported: 2, refused: 1, linesRead: 2, bytesRead: 200 });
  });
});

describe("claiming imports", () => {
  it("takes turns between teams: one team's many uploads do not hold another's back", async () => {
    // Nothing else of this database's imports may be claimable meanwhile.
    await handle.db.execute(sql`update imports set status = 'READY' where status = 'PROCESSING'`);
    const teamOf = async (slug: string) => {
      const team = await createTeam(handle.db, { slug: `${slug}-${newId("team").slice(5, 15)}` });
      const pipeline = await createPipeline(handle.db, { teamId: team.id, name: "p" });
      return { team, pipeline };
    };
    const upload = async ({ team, pipeline }: Awaited<ReturnType<typeof teamOf>>) => {
      const id = newId("import");
      await handle.db
        .insert(imports)
        .values({ id, teamId: team.id, pipelineId: pipeline.id, blobKey: `imports/${id}/upload.jsonl`, bytes: 10 });
      return id;
    };
    const a = await teamOf("a");
    const b = await teamOf("b");
    const as = [await upload(a), await upload(a), await upload(a)];
    const bs = [await upload(b)];
    const claim = async (owner: string) => (await claimImport(handle.db, { owner, leaseSeconds: 30 }))!.id;
    const finish = (id: string) =>
      handle.db.execute(
        sql`update imports set status = 'READY', lease_owner = null, updated_at = now() where id = ${id}`,
      );

    // Two workers: the second takes team b's while team a's first runs.
    expect(await claim("w1")).toBe(as[0]);
    expect(await claim("w2")).toBe(bs[0]);
    await finish(as[0]!);
    await finish(bs[0]!);
    // One worker: b's next (uploaded after a's) runs before a's third, a's last having ended later.
    const bs2 = await upload(b);
    expect(await claim("w1")).toBe(as[1]);
    await finish(as[1]!);
    expect(await claim("w1")).toBe(bs2);
    await finish(bs2);
    expect(await claim("w1")).toBe(as[2]);
  });
});
