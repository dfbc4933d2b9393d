import { sql } from "drizzle-orm";
import { env } from "../env";
import type { BlobStore } from "../blob";
import type { DbOrTx } from "../db/client";
import { notFound } from "../errors";
import { DELETE_BATCH, removeSamples } from "./sample-deletion";
import { removeImportFile } from "./import-jobs";

/**
 * The background deletions the workers run (workers/maintenance.ts): retention, the samples of
 * deleted pipelines, expired idempotency keys. Each step is batches of short transactions; the
 * batches of two workers running at once skip each other's rows (SKIP LOCKED).
 */

/**
 * DELETE /v1/pipelines/:id: the pipeline is gone at once (404 everywhere, its samples' URLs too);
 * the workers then delete its samples and the row (purgeDeletedPipelines). Its datasets stay:
 * READY ones that hold samples are marked `containsDeletedSamples`, PROCESSING ones FAIL, and so
 * do its imports in progress (their uploaded files are removed).
 */
export async function deletePipeline(db: DbOrTx, blobs: BlobStore, input: { teamId: string; id: string }) {
  const importIds = await db.transaction(async (tx) => {
    const found = await tx.execute(sql`
      update pipelines set deleted_at = now(), updated_at = now()
      where id = ${input.id} and team_id = ${input.teamId} and deleted_at is null returning id`);
    if (found.length === 0) throw notFound(`No pipeline with id '${input.id}'.`, "id");
    // PROCESSING first: a dataset that becomes READY meanwhile is then marked by the next statement.
    await tx.execute(sql`
      update datasets set status = 'FAILED', error = 'Its pipeline was deleted before it was packaged.',
        lease_owner = null, lease_expires_at = null, updated_at = now()
      where pipeline_id = ${input.id} and status = 'PROCESSING' and deleted_at is null`);
    await tx.execute(sql`
      update datasets set contains_deleted_samples = true, updated_at = now()
      where pipeline_id = ${input.id} and status = 'READY' and deleted_at is null and size > 0`);
    const failed = await tx.execute<{ id: string }>(sql`
      update imports set status = 'FAILED', error = 'The pipeline was deleted.', lease_owner = null,
        lease_expires_at = null, updated_at = now()
      where pipeline_id = ${input.id} and status = 'PROCESSING' returning id`);
    return failed.map((r) => r.id);
  });
  // The deletion is done: a file not removed now (the object store away) is the maintenance's to
  // remove (sweepImportFiles), not a 500 for a deletion that happened.
  for (const id of importIds) await removeImportFile(db, blobs, id);
}

/**
 * Deletes the samples of deleted pipelines, then the pipelines themselves; returns samples
 * deleted. Each step below stops between batches once `signal` aborts (the worker stops): a
 * backlog of millions is taken up again at the next run.
 */
export async function purgeDeletedPipelines(db: DbOrTx, batch = DELETE_BATCH, signal?: AbortSignal): Promise<number> {
  const deleted = await db.execute<{ id: string }>(sql`select id from pipelines where deleted_at is not null`);
  let total = 0;
  for (const { id } of deleted) {
    if (signal?.aborted) break;
    // Its datasets were told when it was deleted (deletePipeline).
    total += await deleteInBatches(db, id, sql`true`, batch, false, signal);
    // Not before its imports' files are gone: the rows that name them go with the pipeline.
    await db.execute(sql`
      delete from pipelines where id = ${id} and deleted_at is not null
        and not exists (select 1 from samples where pipeline_id = ${id})
        and not exists (select 1 from imports where pipeline_id = ${id} and not file_removed)`);
  }
  return total;
}

/** Deletes the samples older than their pipeline's `retentionDays`; returns how many. */
export async function applyRetention(db: DbOrTx, batch = DELETE_BATCH, signal?: AbortSignal): Promise<number> {
  const kept = await db.execute<{ id: string; days: number }>(sql`
    select id, retention_days as days from pipelines where retention_days is not null and deleted_at is null`);
  let total = 0;
  for (const p of kept) {
    if (signal?.aborted) break;
    // Datasets being packaged are marked, not sent back to the queue: with steady traffic
    // samples age out every run, and one that takes longer than a run would never finish.
    // n × 24 hours, as documented: `days =>` counts calendar days in the database's time zone (23
    // or 25 hours across a daylight-saving change).
    const aged = sql`created_at < now() - make_interval(hours => ${p.days * 24})`;
    total += await deleteInBatches(db, p.id, aged, batch, "mark", signal);
  }
  return total;
}

/**
 * Idempotency keys live 24 hours (lib/services/idempotency.ts); returns how many went. In batches:
 * keyed ingest goes on while no worker runs, and one statement over the whole backlog ran into the
 * statement timeout, rolled back, and met a larger backlog at every later run.
 */
export async function sweepIdempotencyKeys(db: DbOrTx, batch = 10_000, signal?: AbortSignal): Promise<number> {
  let total = 0;
  for (;;) {
    const [{ n }] = (await db.execute<{ n: number }>(sql`
      with gone as (
        delete from idempotency_keys where ctid in (
          select ctid from idempotency_keys where created_at < now() - interval '24 hours'
          limit ${batch} for update skip locked)
        returning 1)
      select count(*)::int as n from gone`)) as unknown as [{ n: number }];
    total += n;
    if (n < batch || signal?.aborted) return total;
  }
}

/** How long a worker's row stays after its last heartbeat (a process killed, or crashed, never deletes it). */
export const GONE_WORKER_HOURS = 1;

/**
 * The rows of workers gone for GONE_WORKER_HOURS (a graceful stop deletes its own): a worker in a
 * crash loop added one per start, and every routing read scanned them all. Returns how many.
 */
export async function sweepGoneWorkers(db: DbOrTx): Promise<number> {
  // Never within ten heartbeats, however long the operator made them.
  const seconds = Math.max(GONE_WORKER_HOURS * 3600, 10 * env().WORKER_HEARTBEAT_SECONDS);
  const [{ n }] = (await db.execute<{ n: number }>(sql`
    with gone as (
      delete from workers where heartbeat_at < now() - make_interval(secs => ${seconds}) returning 1)
    select count(*)::int as n from gone`)) as unknown as [{ n: number }];
  return n;
}

/** Oldest first, `batch` samples per transaction, until none matches `condition`. */
async function deleteInBatches(
  db: DbOrTx,
  pipelineId: string,
  condition: ReturnType<typeof sql>,
  batch: number,
  datasets: boolean | "mark",
  signal?: AbortSignal,
): Promise<number> {
  let total = 0;
  for (;;) {
    if (signal?.aborted) return total;
    const found = await db.transaction(async (tx) => {
      const rows = await tx.execute<{ id: string }>(sql`
        select id from samples where pipeline_id = ${pipelineId} and ${condition}
        order by created_at, id limit ${batch} for update skip locked`);
      total += await removeSamples(
        tx,
        pipelineId,
        rows.map((r) => r.id),
        { datasets },
      );
      return rows.length;
    });
    if (found < batch) return total;
  }
}
