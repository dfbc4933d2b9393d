import { createHash, randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { BlobStore } from "@/lib/blob";
import type { DbOrTx } from "@/lib/db/client";
import { completeDataset, datasetJsonl, renewDatasetLease, type DatasetJob } from "@/lib/services/dataset-jobs";
import { datasetBlobPrefix } from "@/lib/services/datasets";

/** A failure whose message is safe to show the user as the dataset's `error`. */
export class PackagingError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "PackagingError";
  }
}

/** This worker no longer holds the job (taken over after an expired lease, or deleted). */
export class LeaseLost extends Error {
  constructor() {
    super("lease lost");
    this.name = "LeaseLost";
  }
}

export type PackageOptions = {
  db: DbOrTx;
  blobs: BlobStore;
  owner: string;
  leaseSeconds: number;
  batchSize: number;
  /** Testing only: pause after every `batchSize` samples. */
  throttleMs?: number;
  /** Aborted when the worker shuts down. */
  signal?: AbortSignal;
};

export type PackageResult = { status: "READY"; bytes: number; checksum: string; ms: number } | { status: "lost" };

/**
 * Packages one claimed dataset: streams the frozen selection into the blob store under a key
 * of its own (`datasets/<id>/<uuid>/<name>.jsonl`, so a worker that lost the job can never overwrite
 * the winner's file), hashing and counting as it goes, then publishes it by the fenced
 * PROCESSING → READY update. The lease is renewed (with the progress) every second while it runs;
 * a failed renewal aborts the upload. Throws PackagingError (user-safe) or anything unexpected.
 */
export async function packageDataset(job: DatasetJob, o: PackageOptions): Promise<PackageResult> {
  const started = performance.now();
  // The file is named after the dataset, so both drivers' downloads save as `<name>.jsonl`.
  const attemptPrefix = `${datasetBlobPrefix(job.id)}${randomUUID()}/`;
  const key = `${attemptPrefix}${job.name}.jsonl`;
  const hash = createHash("sha256");
  let bytes = 0;
  let written = 0;
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
      progress: written,
    });
    if (!held) {
      leaseLost = true;
      abort.abort(new LeaseLost());
    }
  });

  async function* lines(): AsyncGenerator<Buffer> {
    try {
      for await (const { chunk, count } of datasetJsonl(o.db, job, { batchSize: o.batchSize })) {
        abort.signal.throwIfAborted();
        hash.update(chunk);
        bytes += chunk.length;
        written += count;
        yield chunk;
        // One pause per batchSize samples, however the rows arrive (a COPY chunk may hold many).
        sinceThrottle += count;
        const pauses = Math.floor(sinceThrottle / o.batchSize);
        if (o.throttleMs && pauses > 0) {
          sinceThrottle -= pauses * o.batchSize;
          await sleep(o.throttleMs * pauses, undefined, { signal: abort.signal });
        }
      }
    } catch (err) {
      if (abort.signal.aborted) throw abort.signal.reason;
      throw new PackagingError("Could not read the selected samples from the database.", { cause: err });
    }
  }

  try {
    try {
      await o.blobs.put(key, lines(), { signal: abort.signal });
    } catch (err) {
      if (leaseLost) return { status: "lost" };
      if (abort.signal.aborted) throw abort.signal.reason;
      if (err instanceof PackagingError) throw err;
      throw new PackagingError("Could not write the dataset file to the blob store.", { cause: err });
    }
    if (written !== job.size) {
      await o.blobs.removePrefix(attemptPrefix);
      throw new PackagingError(
        `The selection has ${written} samples now, not ${job.size}; it changed while packaging.`,
      );
    }
    const checksum = `sha256:${hash.digest("hex")}`;
    abort.abort(); // stop renewing before the final update
    await renewer;
    const published = await completeDataset(o.db, {
      id: job.id,
      owner: o.owner,
      blobKey: key,
      bytes,
      checksum,
      progress: written,
    });
    if (!published) {
      await o.blobs.removePrefix(attemptPrefix); // our file, never referenced by the row
      return { status: "lost" };
    }
    return { status: "READY", bytes, checksum, ms: performance.now() - started };
  } finally {
    o.signal?.removeEventListener("abort", stopOnShutdown);
    if (!abort.signal.aborted) abort.abort();
    await renewer;
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
    await tick().catch((err: unknown) => console.error("[packager] lease renewal failed", err));
  }
}
