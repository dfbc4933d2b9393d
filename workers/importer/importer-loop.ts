import { logger } from "@/lib/observe/log";
import { setTimeout as sleep } from "node:timers/promises";
import { claimImport, failImport, releaseImport, removeImportFile, type ImportJob } from "@/lib/services/import-jobs";
import { importFile, type ImportOptions } from "./import-file";

export type ImporterOptions = Omit<ImportOptions, "signal"> & {
  pollMs: number;
  maxAttempts: number;
  log?: (line: string) => void;
};

/**
 * The worker's import loop, the packager's twin: claim a PROCESSING import (SKIP LOCKED, with a
 * lease), store its file, repeat; sleep `pollMs` when there is nothing to do. A worker that dies
 * leaves the lease to expire; the next claim resumes after the last committed chunk. An import
 * claimed more than `maxAttempts` times becomes FAILED; `stop()` gives the current one back.
 */
export function startImporter(o: ImporterOptions): { stop: () => Promise<void> } {
  const log = o.log ?? ((line: string) => logger().info(line));
  const shutdown = new AbortController();

  const fail = async (job: ImportJob, reason: string) => {
    if (await failImport(o.db, { id: job.id, owner: o.owner, reason })) {
      await removeImportFile(o.db, o.blobs, job.id);
      log(`[importer] ${job.id} FAILED: ${reason}`);
    }
  };

  const runJob = async (job: ImportJob) => {
    if (job.attempts > o.maxAttempts) return fail(job, `The import was interrupted ${o.maxAttempts} times; giving up.`);
    try {
      const started = performance.now();
      const result = await importFile(job, { ...o, signal: shutdown.signal });
      if (result === "READY")
        log(`[importer] ${job.id} READY in ${((performance.now() - started) / 1000).toFixed(2)}s`);
      else log(`[importer] ${job.id}: lease lost (taken over or ended); dropped`);
    } catch (err) {
      if (shutdown.signal.aborted) return releaseImport(o.db, { id: job.id, owner: o.owner, countAttempt: false });
      logger().error({ err, import: job.id, attempt: job.attempts }, "[importer] attempt failed");
      if (job.attempts >= o.maxAttempts) await fail(job, "Could not read the uploaded file.");
      else await releaseImport(o.db, { id: job.id, owner: o.owner, countAttempt: true });
    }
  };

  const loop = (async () => {
    while (!shutdown.signal.aborted) {
      let job: ImportJob | undefined;
      try {
        job = await claimImport(o.db, { owner: o.owner, leaseSeconds: o.leaseSeconds, teams: o.teams });
        if (job) await runJob(job);
      } catch (err) {
        logger().error({ err }, "[importer] job loop error");
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
