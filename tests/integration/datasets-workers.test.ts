import type { ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { eq, sql } from "drizzle-orm";
import { parquetReadObjects } from "hyparquet";
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { S3BlobStore } from "@/lib/blob/s3-blob-store";
import { connect, type DbHandle } from "@/lib/db/client";
import { datasets, samples, type Dataset } from "@/lib/db/schema";
import { newId } from "@/lib/ids";
import { datasetRows, splitSideSql } from "@/lib/services/dataset-jobs";
import { createDataset, datasetDownload, deleteDataset } from "@/lib/services/datasets";
import { createPipeline } from "@/lib/services/pipelines";
import { mergeSampleMetadata } from "@/lib/services/samples";
import { createTeam } from "@/lib/services/teams";
import { startS3Server } from "../helpers/s3-server";
import { scratchDatabase } from "../helpers/scratch-database";
import { startWorker } from "../setup/global-setup";

// Real worker processes on a database of their own (the suite's worker would otherwise take
// the jobs): a worker killed mid-file, two workers racing, and the S3 driver end to end.

const authSecret = "test-secret-0123456789-0123456789-abcdef";
let database: Awaited<ReturnType<typeof scratchDatabase>>;
let handle: DbHandle;
let dataDir: string;
const running: ChildProcess[] = [];

beforeAll(async () => {
  database = await scratchDatabase();
  handle = connect(database.url, { max: 4 });
  dataDir = mkdtempSync(path.join(os.tmpdir(), "lmp-dsw-"));
  process.env.AUTH_SECRET = authSecret; // signs local download URLs in this process
});
afterEach(async () => {
  for (const child of running.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
  }
});
afterAll(async () => {
  await handle?.close();
  await database?.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function worker(env: Record<string, string> = {}) {
  const w = await startWorker({
    DATABASE_URL: database.url,
    AUTH_SECRET: authSecret,
    DATA_DIR: dataDir,
    WORKER_MODELS: "",
    WORKER_HEARTBEAT_SECONDS: "1",
    DATASET_POLL_MS: "100",
    DATASET_THROTTLE_SAMPLES: "10",
    ...env,
  });
  running.push(w.child);
  onTestFailed(() => console.log(`worker logs:\n${w.logs.join("")}`));
  return w;
}

/** A pipeline of n samples, oldest first; returns what its full dataset file must hold. */
async function pipelineOf(n: number, padding = 0): Promise<{ teamId: string; pipelineId: string; lines: unknown[] }> {
  const team = await createTeam(handle.db, { slug: `t-${newId("team").slice(5, 15)}` });
  const pipeline = await createPipeline(handle.db, { teamId: team.id, name: "p" });
  const base = Date.now() - n * 1000;
  const rows = Array.from({ length: n }, (_, i) => ({
    id: newId("sample"),
    pipelineId: pipeline.id,
    teamId: team.id,
    messages: [
      { role: "user" as const, content: `q${i} "\\" é` },
      { role: "assistant" as const, content: `a${i}${"\n".repeat(padding)}` },
    ],
    length: 2,
    createdAt: new Date(base + i),
  }));
  for (let i = 0; i < rows.length; i += 500) await handle.db.insert(samples).values(rows.slice(i, i + 500));
  return { teamId: team.id, pipelineId: pipeline.id, lines: rows.map((r) => ({ messages: r.messages })) };
}

/** What the COPY of a whole pipeline needs of a dataset job: its bound at the pipeline's newest sample. */
async function jobOf(one: DbHandle, pipelineId: string) {
  const [last] = await one.db.execute<{ c: string; id: string }>(
    sql`select created_at::text as c, id from samples where pipeline_id = ${pipelineId} order by created_at desc, id desc limit 1`,
  );
  return { pipelineId, selection: {}, bound: { createdAt: last!.c, sampleId: last!.id } };
}

const row = async (id: string): Promise<Dataset> =>
  (await handle.db.select().from(datasets).where(eq(datasets.id, id)))[0]!;

async function waitFor<T>(probe: () => Promise<T | undefined>, timeout = 30_000): Promise<T> {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 50));
  }
}

const localFile = (d: Dataset) => readFileSync(path.join(dataDir, "blobs", d.blobKey!), "utf8");
const parse = (text: string) =>
  text
    .trimEnd()
    .split("\n")
    .map((l) => JSON.parse(l) as unknown);
const sha256 = (data: string | Buffer) => `sha256:${createHash("sha256").update(data).digest("hex")}`;

describe("dataset packaging by worker processes", () => {
  it("takes over a job from a worker killed mid-file once its lease expires; never READY with a partial file", async () => {
    const { teamId, pipelineId, lines } = await pipelineOf(200);
    const d = await createDataset(handle.db, { teamId, pipelineId, name: "crash", selection: {} });
    // 20 batches at 150 ms each: about 3 s of packaging, renewed every ~670 ms on a 2 s lease.
    const first = await worker({ DATASET_THROTTLE_MS: "150", DATASET_LEASE_SECONDS: "2" });
    const midway = await waitFor(async () => {
      const r = await row(d.id);
      return r.progress >= 30 ? r : undefined;
    });
    expect(midway.status).toBe("PROCESSING");
    first.child.kill("SIGKILL");
    await new Promise((r) => first.child.once("exit", r));

    const afterKill = await row(d.id);
    expect(afterKill).toMatchObject({ status: "PROCESSING", blobKey: null, attempts: 1 });
    expect(afterKill.leaseOwner).toBe(midway.leaseOwner);
    // Nothing published under the dataset's prefix: the partial file is only a temporary file.
    const prefix = path.join(dataDir, "blobs", "datasets", d.id);
    expect(
      existsSync(prefix) ? readdirSync(prefix, { recursive: true }).filter((f) => String(f).endsWith(".jsonl")) : [],
    ).toEqual([]);

    await worker({ DATASET_LEASE_SECONDS: "2" });
    const ready = await waitFor(async () => {
      const r = await row(d.id);
      expect(r.status).not.toBe("FAILED");
      return r.status === "READY" ? r : undefined;
    });
    expect(ready.attempts).toBe(2);
    expect(ready.leaseOwner).toBeNull();
    const text = localFile(ready);
    expect(parse(text)).toEqual(lines);
    expect(ready).toMatchObject({ size: 200, progress: 200, bytes: Buffer.byteLength(text), checksum: sha256(text) });
  });

  it("holds the samples that match when it is packaged: labels added after creation (PATCH) count, and size follows", async () => {
    const { teamId, pipelineId, lines } = await pipelineOf(6);
    const ids = (
      await handle.db.select({ id: samples.id }).from(samples).where(eq(samples.pipelineId, pipelineId))
    ).map((r) => r.id);
    const rate = (i: number) => mergeSampleMetadata(handle.db, { teamId, id: ids[i]!, metadata: { rating: "good" } });
    await rate(0);
    await rate(2);
    const selection = { metadata: { rating: "good" } };
    const d = await createDataset(handle.db, { teamId, pipelineId, name: "rated", selection });
    expect(d.size).toBe(2);
    await rate(4); // feedback arrives before a worker packages it
    await worker();
    const ready = await waitFor(async () => {
      const r = await row(d.id);
      expect(r.status, r.error ?? "").not.toBe("FAILED"); // before: "The selection has 3 samples now, not 2"
      return r.status === "READY" ? r : undefined;
    });
    expect(parse(localFile(ready))).toEqual([lines[0], lines[2], lines[4]]);
    expect(ready).toMatchObject({ size: 3, progress: 3 });
  });

  it("lets two racing workers share the jobs, each dataset packaged by exactly one of them, once", async () => {
    const jobs = [];
    for (let i = 0; i < 4; i++) {
      const { teamId, pipelineId, lines } = await pipelineOf(100);
      const d = await createDataset(handle.db, { teamId, pipelineId, name: `race-${i}`, selection: {} });
      jobs.push({ id: d.id, lines });
    }
    // Each job outlives the lease (10 batches × 200 ms vs 2 s): only renewals keep it.
    const env = { DATASET_THROTTLE_MS: "200", DATASET_LEASE_SECONDS: "2" };
    const [a, b] = await Promise.all([worker(env), worker(env)]);
    for (const job of jobs) {
      const ready = await waitFor(async () => {
        const r = await row(job.id);
        return r.status === "READY" ? r : undefined;
      }, 60_000);
      expect(ready.attempts, job.id).toBe(1);
      expect(parse(localFile(ready))).toEqual(job.lines);
      // (The worker logs the line just after its READY update: wait for the pipe.)
      const packagedBy = await waitFor(async () => {
        const by = [a, b].filter((w) => w.logs.join("").includes(`${job.id} READY`));
        return by.length > 0 ? by : undefined;
      }, 5_000);
      expect(packagedBy, job.id).toHaveLength(1);
    }
  });

  it("packages without loading the inference runtime while the worker serves no model", async () => {
    const { teamId, pipelineId, lines } = await pipelineOf(50);
    const d = await createDataset(handle.db, { teamId, pipelineId, name: "lean", selection: {} });
    const w = await worker();
    const ready = await waitFor(async () => {
      const r = await row(d.id);
      return r.status === "READY" ? r : undefined;
    });
    expect(parse(localFile(ready))).toEqual(lines);
    // onnxruntime's native library (and transformers.js, ~150 MB resident) come with the first model.
    const maps = readFileSync(`/proc/${w.child.pid}/maps`, "utf8");
    expect(maps).not.toMatch(/onnxruntime/);
  });

  it("leaves the pool's connection usable after a slowly read or early-stopped file", { timeout: 20_000 }, async () => {
    const { pipelineId, lines } = await pipelineOf(400); // ~40 kB: more than a stream buffer
    const one = connect(database.url, { max: 1 });
    try {
      const job = await jobOf(one, pipelineId);
      // The COPY lifts the statement timeout and parallel plans, and writes times in UTC, on its
      // connection, for itself only.
      const settings = () =>
        one.db.execute(
          sql`select current_setting('statement_timeout') as t, current_setting('max_parallel_workers_per_gather') as p,
                     current_setting('TimeZone') as z`,
        );
      await one.db.execute(sql`set timezone = 'America/New_York'`);
      const before = await settings();
      const got: unknown[] = [];
      for await (const { buffers, bounds, count } of datasetRows(one.db, job, "line")) {
        await new Promise((r) => setTimeout(r, 100)); // a slow blob store
        for (let r = 0; r < count; r++)
          got.push(JSON.parse(buffers[r]!.toString("utf8", bounds[2 * r], bounds[2 * r + 1])));
      }
      expect(got).toEqual(lines);
      expect(await settings()).toEqual(before);
      // The Parquet record's time is in UTC, whatever the connection's time zone.
      let first: string | undefined;
      for await (const { buffers, bounds } of datasetRows(one.db, job, "parquet"))
        first ??= buffers[0]!.toString("utf8", bounds[0], bounds[1]);
      const [oldest] = await one.db.execute<{ utc: string }>(
        sql`select (min(created_at) at time zone 'UTC')::text as utc from samples where pipeline_id = ${pipelineId}`,
      );
      expect(JSON.parse(first!).createdAt).toBe(`${oldest!.utc}+00`);
      expect(await settings()).toEqual(before);
      for await (const _ of datasetRows(one.db, job, "line")) break;
      expect(await one.db.execute(sql`select 1 as one`)).toEqual([{ one: 1 }]);
      expect(await settings()).toEqual(before);
    } finally {
      await one.close();
    }
  });

  it(
    "reads a dataset's rows in binary COPY: every row and split side in order, at most about 1 MB ahead of a slow reader",
    { timeout: 30_000 },
    async () => {
      // Answers of 8,000 line breaks: 16 kB of JSON escapes per row (text COPY would double them), 2.4 MB in all.
      const { pipelineId, lines } = await pipelineOf(150, 8000);
      const one = connect(database.url, { max: 1 });
      try {
        const job = await jobOf(one, pipelineId);
        const split = { validation: 0.5, seed: 3 };
        const got: unknown[] = [];
        const sides: number[] = [];
        let largest = 0;
        for await (const { buffers, bounds, count } of datasetRows(one.db, job, "line", split)) {
          let bytes = 0;
          for (let r = 0; r < count; r++) {
            got.push(JSON.parse(buffers[r]!.toString("utf8", bounds[4 * r], bounds[4 * r + 1])));
            sides.push(buffers[r]!.readInt32BE(bounds[4 * r + 2]!));
            bytes += bounds[4 * r + 1]! - bounds[4 * r]!;
          }
          largest = Math.max(largest, bytes);
          await new Promise((r) => setTimeout(r, 30)); // a slow blob store
        }
        expect(got).toEqual(lines);
        const expected = await one.db.execute<{ side: number }>(
          sql`select ${splitSideSql(split)} as side from samples s where pipeline_id = ${pipelineId} order by created_at, id`,
        );
        expect(sides).toEqual(expected.map((e) => Number(e.side)));
        expect(new Set(sides)).toEqual(new Set([0, 1]));
        // Paused at 1 MB ahead (what was already on its way still arrives), not the whole 2.4 MB at once.
        expect(largest).toBeLessThan(1.6 * 1024 * 1024);
        for await (const _ of datasetRows(one.db, job, "parquet")) break;
        expect(await one.db.execute(sql`select 1 as one`)).toEqual([{ one: 1 }]);
      } finally {
        await one.close();
      }
    },
  );

  it("packages into S3 and hands out a presigned URL of the complete file; delete removes it", async () => {
    const s3 = await startS3Server();
    try {
      const { teamId, pipelineId, lines } = await pipelineOf(120);
      const d = await createDataset(handle.db, {
        teamId,
        pipelineId,
        name: "to-s3",
        selection: { limit: 100, offset: 10 },
      });
      // Parquet too: its upload starts only once DuckDB has written the file.
      const pq = await createDataset(handle.db, {
        teamId,
        pipelineId,
        name: "to-s3-parquet",
        selection: { limit: 100, offset: 10 },
        options: { format: "parquet", compression: "none", dedupe: false },
      });
      await worker(s3.env);
      const [ready, readyParquet] = await Promise.all(
        [d.id, pq.id].map((id) =>
          waitFor(async () => {
            const r = await row(id);
            return r.status === "READY" ? r : undefined;
          }),
        ),
      );
      expect(ready.blobKey).toMatch(new RegExp(`^datasets/${d.id}/[0-9a-f-]{36}/to-s3\\.jsonl$`));
      const store = new S3BlobStore(s3.options);
      const { url } = await datasetDownload(handle.db, store, { teamId, id: d.id, ttlSeconds: 60 });
      const text = await (await fetch(url)).text();
      expect(parse(text)).toEqual(lines.slice(10, 110));
      expect(ready.checksum).toBe(sha256(text));
      const parquetUrl = (await datasetDownload(handle.db, store, { teamId, id: pq.id, ttlSeconds: 60 })).url;
      const bytes = await (await fetch(parquetUrl)).arrayBuffer();
      expect(readyParquet.checksum).toBe(sha256(Buffer.from(bytes)));
      const rows = await parquetReadObjects({ file: bytes });
      expect(rows.map((r) => ({ messages: r.messages }))).toEqual(
        lines.slice(10, 110).map((l) => ({
          messages: (l as { messages: object[] }).messages.map((m) => ({
            ...m,
            name: null,
            tool_call_id: null,
            tool_calls: undefined, // a null list (hyparquet reads it so; pyarrow as None)
            weight: null,
          })),
        })),
      );
      await deleteDataset(handle.db, store, { teamId, id: d.id });
      expect((await fetch(url)).status).toBe(404);
      store.client.destroy();
    } finally {
      await s3.stop();
    }
  });

  it("marks a dataset FAILED with a user-safe reason when the blob store keeps failing", async () => {
    const { teamId, pipelineId } = await pipelineOf(5);
    const d = await createDataset(handle.db, { teamId, pipelineId, name: "no-store", selection: {} });
    // An S3 endpoint where nothing listens: every upload fails; two tries, then FAILED.
    const s3 = await startS3Server();
    await s3.stop();
    await worker({ ...s3.env, DATASET_MAX_ATTEMPTS: "2" });
    // The first attempt failed: the next waits (before, it was claimed again at once, and a blip
    // spent every attempt in seconds).
    const waiting = await waitFor(async () => {
      const r = await row(d.id);
      return r.attempts === 1 && r.leaseOwner === null && r.leaseExpiresAt ? r : undefined;
    });
    expect(waiting.leaseExpiresAt!.getTime() - Date.now()).toBeGreaterThan(5_000);
    const failed = await waitFor(async () => {
      const r = await row(d.id);
      return r.status === "FAILED" ? r : undefined;
    }, 60_000);
    expect(failed).toMatchObject({
      attempts: 2,
      error: "Could not write the dataset file to the blob store.",
      blobKey: null,
      leaseOwner: null,
    });
    await expect(
      datasetDownload(handle.db, new S3BlobStore(s3.options), { teamId, id: d.id, ttlSeconds: 60 }),
    ).rejects.toMatchObject({ status: 409 });
    expect(
      (await handle.db.execute(sql`select count(*)::int as n from datasets where status = 'PROCESSING'`))[0],
    ).toEqual({ n: 0 });
  });
});
