import { setTimeout as sleep } from "node:timers/promises";
import type { BlobStore } from "@/lib/blob";
import { LocalBlobStore } from "@/lib/blob";
import type { DbOrTx } from "@/lib/db/client";
import { claimDataset, failDataset, releaseDataset, type DatasetJob } from "@/lib/services/dataset-jobs";
import type { JobTeams } from "@/lib/services/job-teams";
import { LeaseLost, PackagingError } from "./errors";
import { packageDataset } from "./package-dataset";
import { sweepParquetScratch } from "./parquet-file";
import { logger } from "@/lib/observe/log";

export type PackagerOptions = {
  db: DbOrTx;
  blobs: BlobStore;
  /** This worker's id: the lease owner of the jobs it claims. */
  owner: string;
  leaseSeconds: number;
  /** Whose datasets this worker packages (WORKER_SERVES' team entries); unset: any team's. */
  teams?: JobTeams;
  /** Where Parquet files are put together before their upload (DATA_DIR/tmp). */
  scratchDir: string;
  pollMs: number;
  maxAttempts: number;
  throttleMs?: number;
  throttleEvery?: number;
  log?: (line: string) => void;
};

/**
 * The worker's dataset job loop: claim a PROCESSING dataset (SKIP LOCKED, with a lease),
 * package it, repeat; sleep `pollMs` when there is nothing to do. A job claimed more than
 * `maxAttempts` times (its workers crashed or failed) becomes FAILED. `stop()` gives the
 * current job back at once, so another worker need not wait for the lease to expire.
 */
export function startPackager(o: PackagerOptions): { stop: () => Promise<void> } {
  const log = o.log ?? ((line: string) => logger().info(line));
  const shutdown = new AbortController();
  const sweep = async () => {
    // Temporary files of killed writers (a live writer touches its file continuously).
    const olderThanMs = Math.max(60, 4 * o.leaseSeconds) * 1000;
    if (o.blobs instanceof LocalBlobStore) await o.blobs.sweepTemporary(olderThanMs);
    await sweepParquetScratch(o.scratchDir, olderThanMs);
  };

  const runJob = async (job: DatasetJob) => {
    if (job.attempts > o.maxAttempts) {
      const reason = `Packaging was interrupted ${o.maxAttempts} times; giving up.`;
      await failDataset(o.db, { id: job.id, owner: o.owner, reason });
      log(`[packager] ${job.id} FAILED: ${reason}`);
      return;
    }
    try {
      const result = await packageDataset(job, { ...o, signal: shutdown.signal });
      if (result.status === "READY") {
        log(
          `[packager] ${job.id} READY: ${job.size} samples, ${result.bytes} bytes in ${(result.ms / 1000).toFixed(2)}s`,
        );
      } else log(`[packager] ${job.id}: lease lost (taken over or deleted); dropped`);
    } catch (err) {
      if (shutdown.signal.aborted) {
        await releaseDataset(o.db, { id: job.id, owner: o.owner, countAttempt: false });
        return;
      }
      if (err instanceof LeaseLost) return;
      logger().error({ dataset: job.id, attempt: job.attempts, err }, "packaging failed");
      const reason = err instanceof PackagingError ? err.message : "Packaging failed unexpectedly.";
      if (job.attempts >= o.maxAttempts) {
        await failDataset(o.db, { id: job.id, owner: o.owner, reason });
        log(`[packager] ${job.id} FAILED: ${reason}`);
      } else await releaseDataset(o.db, { id: job.id, owner: o.owner, countAttempt: true });
    }
  };

  const loop = (async () => {
    await sweep().catch(() => {});
    while (!shutdown.signal.aborted) {
      let job: DatasetJob | undefined;
      try {
        job = await claimDataset(o.db, { owner: o.owner, leaseSeconds: o.leaseSeconds, teams: o.teams });
        if (job) await runJob(job);
      } catch (err) {
        logger().error({ err }, "packager loop error");
      }
      if (!job) await sleep(o.pollMs, undefined, { signal: shutdown.signal }).catch(() => {});
    }
  })();

  return {
    stop: async () => {
      shutdown.abort();
      await loop;
    },
  };
}
