import { ApiError } from "@/lib/errors";
import { sql } from "drizzle-orm";
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { BlobStore } from "@/lib/blob";
import type { CopyRowBatch } from "@/lib/db/copy-binary";
import type { DbOrTx } from "@/lib/db/client";
import { SPLITS, type DatasetStats, type SplitName } from "@/lib/contracts/dataset-options";
import {
  completeDataset,
  datasetRows,
  renewDatasetLease,
  type DatasetJob,
  type RowColumns,
  type StoredFile,
} from "@/lib/services/dataset-jobs";
import { datasetBlobPrefix } from "@/lib/services/datasets";
import { LeaseLost, PackagingError } from "./errors";
import { DatasetOutput, datasetFileName } from "./dataset-output";
import { copyLines, needsRows, packageRows } from "./package-rows";
import { logger } from "@/lib/observe/log";

export type PackageOptions = {
  db: DbOrTx;
  blobs: BlobStore;
  owner: string;
  leaseSeconds: number;
  /** Where Parquet files are put together before their upload (DATA_DIR/tmp). */
  scratchDir: string;
  /** Testing only: pause `throttleMs` after every `throttleEvery` samples. */
  throttleMs?: number;
  throttleEvery?: number;
  /** Aborted when the worker shuts down. */
  signal?: AbortSignal;
};

export type PackageResult = { status: "READY"; bytes: number; ms: number } | { status: "lost" };

/**
 * Packages one claimed dataset: streams the frozen selection through the dataset's options into
 * its file(s) in the blob store, under keys of this attempt's own (`datasets/<id>/<uuid>/…`, so a
 * worker that lost the job can never overwrite the winner's files), then publishes them by the
 * fenced PROCESSING → READY update. The lease is renewed (with the progress) every second while
 * it runs; a failed renewal aborts the uploads. Throws PackagingError (user-safe) or anything
 * unexpected.
 */
export async function packageDataset(job: DatasetJob, o: PackageOptions): Promise<PackageResult> {
  const started = performance.now();
  const attemptPrefix = `${datasetBlobPrefix(job.id)}${randomUUID()}/`;
  // This attempt's files, unless the row names them: nothing else would ever remove them.
  const discardAttempt = () =>
    o.blobs
      .removePrefix(attemptPrefix)
      .catch((err: unknown) => logger().warn({ err, dataset: job.id }, "could not remove a failed attempt's files"));
  let read = 0;
  let sinceThrottle = 0;
  const abort = new AbortController();
  const stopOnShutdown = () => abort.abort(o.signal?.reason);
  o.signal?.addEventListener("abort", stopOnShutdown, { once: true });
  let leaseLost = false;
  const renewer = renewLoop(Math.min(1000, (o.leaseSeconds * 1000) / 3), abort.signal, async () => {
    const held = await renewDatasetLease(o.db, {
      id: job.id,
      owner: o.owner,
      leaseSeconds: o.leaseSeconds,
      progress: read,
    });
    if (!held) {
      leaseLost = true;
      abort.abort(new LeaseLost());
    }
  });

  /**
   * The COPY's batches of rows, counted and throttled; a database failure is the user's "could
   * not read".
   */
  async function* counted(source: AsyncIterable<CopyRowBatch>): AsyncGenerator<CopyRowBatch> {
    try {
      for await (const c of source) {
        abort.signal.throwIfAborted();
        read += c.count;
        yield c;
        // One pause per throttleEvery samples, however the rows arrive (a batch may hold many).
        sinceThrottle += c.count;
        const every = o.throttleEvery ?? 1;
        const pauses = Math.floor(sinceThrottle / every);
        if (o.throttleMs && pauses > 0) {
          sinceThrottle -= pauses * every;
          await sleep(o.throttleMs * pauses, undefined, { signal: abort.signal });
        }
      }
    } catch (err) {
      if (abort.signal.aborted) throw abort.signal.reason;
      throw new PackagingError("Could not read the selected samples from the database.", { cause: err });
    }
  }
  const rows = (columns: RowColumns) => counted(datasetRows(o.db, job, columns, job.options.split, abort.signal));

  const splits: (SplitName | null)[] = job.options.split ? [...SPLITS] : [null];
  const outputs = new Map(
    splits.map((split) => {
      const name = datasetFileName(job.name, job.options, split);
      return [
        split,
        new DatasetOutput(
          o.blobs,
          { key: `${attemptPrefix}${name}`, name, split },
          job.options,
          abort.signal,
          o.scratchDir,
        ),
      ];
    }),
  );
  try {
    let stats: DatasetStats;
    let files: StoredFile[];
    try {
      stats = needsRows(job.options)
        ? await packageRows(job, rows, outputs, abort.signal)
        : await copyLines(job.options, rows, outputs.get(null)!);
      files = await Promise.all([...outputs.values()].map((out) => out.finish()));
    } catch (err) {
      abort.abort(err);
      await Promise.all([...outputs.values()].map((out) => out.settled()));
      // A file finished before the other failed (a split): never referenced, it goes too.
      await discardAttempt();
      if (leaseLost) return { status: "lost" };
      if (o.signal?.aborted) throw o.signal.reason;
      if (err instanceof PackagingError || err instanceof LeaseLost) throw err;
      // The local store's disk nearly full: its own words (what is free, what to do).
      if (err instanceof ApiError && err.status === 507) throw new PackagingError(err.message, { cause: err });
      throw new PackagingError("Could not write the dataset file to the blob store.", { cause: err });
    }
    // The selection is frozen at its bound (no sample added since), but which samples before it
    // match is read now: fewer when some were deleted since, more or others when their labels
    // were changed (PATCH, the way feedback is added). `size` becomes what was written.
    abort.abort(); // stop renewing before the final update
    await renewer;
    let published: boolean;
    try {
      published = await completeDataset(o.db, { id: job.id, owner: o.owner, files, stats, progress: read });
    } catch (err) {
      // Unless the update did commit (its answer lost): then the row names them, and they stay.
      if (!(await namedByRow(o.db, job.id, attemptPrefix))) await discardAttempt();
      throw err;
    }
    if (!published) {
      await discardAttempt(); // our files, never referenced by the row
      return { status: "lost" };
    }
    const bytes = files.reduce((sum, f) => sum + f.bytes, 0);
    return { status: "READY", bytes, ms: performance.now() - started };
  } finally {
    o.signal?.removeEventListener("abort", stopOnShutdown);
    if (!abort.signal.aborted) abort.abort();
    await renewer;
  }
}

/** Whether the dataset's row names files under `prefix`; true when that cannot be read (keep them). */
async function namedByRow(db: DbOrTx, id: string, prefix: string): Promise<boolean> {
  try {
    const [row] = await db.execute<{ named: boolean }>(
      sql`select coalesce(files::text like ${`%${prefix}%`}, false) as named from datasets where id = ${id}`,
    );
    return row?.named ?? false;
  } catch {
    return true;
  }
}

/** Runs `tick` every `intervalMs` until `signal` aborts; a failed tick is logged and retried. */
async function renewLoop(intervalMs: number, signal: AbortSignal, tick: () => Promise<void>): Promise<void> {
  while (!signal.aborted) {
    try {
      await sleep(intervalMs, undefined, { signal });
    } catch {
      return;
    }
    await tick().catch((err: unknown) => logger().error({ err }, "dataset lease renewal failed"));
  }
}
