import { setTimeout as sleep } from "node:timers/promises";
import type { BlobStore } from "@/lib/blob";
import { MAX_IMPORT_REFUSALS, type ImportRefusal } from "@/lib/contracts/imports";
import type { DbOrTx } from "@/lib/db/client";
import {
  completeImport,
  failImport,
  ImportLeaseLost,
  ImportPipelineGone,
  removeImportFile,
  renewImportLease,
  storeImportChunk,
  type ImportChunk,
  type ImportJob,
} from "@/lib/services/import-jobs";
import { newSampleRow } from "@/lib/services/sample-rows";
import { readLines } from "./line-reader";
import type { JobTeams } from "@/lib/services/job-teams";
import { importedSampleId, parseLine } from "./parse-line";

export type ImportOptions = {
  db: DbOrTx;
  blobs: BlobStore;
  owner: string;
  leaseSeconds: number;
  /** Whose imports this worker runs (WORKER_SERVES' team entries); unset: any team's. */
  teams?: JobTeams;
  /** Lines per chunk (one transaction each); a chunk also ends at about 4 MB of samples. */
  chunkLines: number;
  /** The longest line (an add body's limit, MAX_BODY_BYTES). */
  maxLineBytes: number;
  /** Testing only: a pause after every chunk. */
  throttleMs?: number;
  signal?: AbortSignal;
};

const CHUNK_JSON_BYTES = 4_000_000;

/**
 * Stores a claimed import's file from where the last committed chunk ended: lines are read from
 * the blob store, parsed and validated, and stored a chunk at a time (storeImportChunk: the
 * samples and the progress in one fenced transaction). The next chunk is parsed while the last one
 * is being stored. Returns "READY", or "lost" when the lease went (taken over, or the import was
 * ended); a failure to read the file throws.
 */
export async function importFile(job: ImportJob, o: ImportOptions): Promise<"READY" | "lost"> {
  const abort = new AbortController();
  const stop = () => abort.abort(o.signal?.reason);
  o.signal?.addEventListener("abort", stop, { once: true });
  let kept = job.refusals;
  let storing: Promise<void> | undefined;
  const renewer = renewLoop(Math.max(200, (o.leaseSeconds * 1000) / 3), abort.signal, async () => {
    if (!(await renewImportLease(o.db, { id: job.id, owner: o.owner, leaseSeconds: o.leaseSeconds })))
      abort.abort(new ImportLeaseLost());
  });
  const store = async (chunk: ImportChunk) => {
    await storing;
    abort.signal.throwIfAborted();
    storing = (async () => {
      await storeImportChunk(o.db, { id: job.id, owner: o.owner, leaseSeconds: o.leaseSeconds, chunk });
      if (o.throttleMs) await sleep(o.throttleMs, undefined, { signal: abort.signal });
    })();
    storing.catch(() => {}); // awaited by the next store or at the end
  };
  try {
    let chunk = emptyChunk();
    let lines = 0;
    let weight = 0;
    if (job.bytesRead < job.bytes) {
      const source = o.blobs.read(job.blobKey, { start: job.bytesRead });
      const reader = readLines(source, {
        start: job.bytesRead,
        firstLine: job.linesRead + 1,
        maxBytes: o.maxLineBytes,
      });
      for await (const line of reader) {
        const parsed = parseLine(line, o.maxLineBytes);
        if (parsed.kind === "sample") {
          const id = importedSampleId(job.id, line.number);
          const row = newSampleRow(id, job.pipelineId, job.teamId, parsed.sample, undefined, job.id);
          chunk.rows.push(row);
          weight += row.json.length;
        } else if (parsed.kind === "refused") {
          chunk.refused++;
          if (kept < MAX_IMPORT_REFUSALS) {
            chunk.refusals.push({ line: line.number, error: parsed.error } satisfies ImportRefusal);
            kept++;
          }
        }
        chunk.bytesRead = line.end;
        chunk.linesRead = line.number;
        if (++lines >= o.chunkLines || weight >= CHUNK_JSON_BYTES) {
          await store(chunk);
          chunk = emptyChunk();
          lines = 0;
          weight = 0;
        }
      }
      if (lines > 0) await store(chunk);
    }
    await storing;
    abort.abort(); // stop renewing before the final update
    await renewer;
    if (!(await completeImport(o.db, { id: job.id, owner: o.owner }))) return "lost";
    await removeImportFile(o.db, o.blobs, job.id);
    return "READY";
  } catch (err) {
    await storing?.catch(() => {});
    if (err instanceof ImportLeaseLost || abort.signal.reason instanceof ImportLeaseLost) return "lost";
    if (err instanceof ImportPipelineGone) {
      if (await failImport(o.db, { id: job.id, owner: o.owner, reason: "The pipeline was deleted." }))
        await removeImportFile(o.db, o.blobs, job.id);
      return "lost";
    }
    throw err;
  } finally {
    o.signal?.removeEventListener("abort", stop);
    if (!abort.signal.aborted) abort.abort();
    await renewer;
  }
}

function emptyChunk(): ImportChunk {
  return { rows: [], bytesRead: 0, linesRead: 0, refused: 0, refusals: [] };
}

async function renewLoop(intervalMs: number, signal: AbortSignal, tick: () => Promise<void>): Promise<void> {
  while (!signal.aborted) {
    try {
      await sleep(intervalMs, undefined, { signal });
    } catch {
      return;
    }
    await tick().catch((err: unknown) => console.error("[importer] lease renewal failed", err));
  }
}
