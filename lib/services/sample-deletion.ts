import { sql } from "drizzle-orm";
import type { DeleteSamplesInput } from "../contracts/deletion";
import type { Selection } from "../contracts/pipelines";
import type { DbOrTx } from "../db/client";
import { notFound } from "../errors";
import { samplePredicate } from "./sample-predicate";
import { afterSample, selectionSource, textArray, whereOf, withinBound } from "./selection-query";

/**
 * Deleting samples: by id, by selection (the API), by age (retention) and with their pipeline.
 * Every deletion goes through `removeSamples`, in batches of short transactions: no lock is held
 * long, and `add`s and reads go on meanwhile. What a deletion guarantees (docs/api.md "Deletion"):
 * the sample's signed URL answers 404, it never enters a dataset packaged afterwards, and a dataset
 * already packaged with it says so (`containsDeletedSamples`).
 */
export const DELETE_BATCH = 1000;

type DatasetRow = {
  id: string;
  filter: Partial<Selection>;
  until_created_at: string;
  until_sample_id: string;
};

/**
 * Deletes samples of one pipeline by id, with their labels, in `tx` (a transaction: the rows are
 * locked before they go); returns how many it deleted (a sample already gone is not counted). Before the rows go, every dataset of the pipeline whose frozen
 * selection could hold one of them is told: a READY one is marked `containsDeletedSamples`; a
 * PROCESSING one is given back to the queue (its worker loses the lease and drops what it wrote;
 * the next claim reads the selection without these samples). One statement updates either kind,
 * re-checked on the row's latest version, so a dataset finishing meanwhile is still marked.
 */
export async function removeSamples(
  tx: DbOrTx,
  pipelineId: string,
  ids: string[],
  options: { datasets?: boolean | "mark" } = {},
): Promise<number> {
  if (ids.length === 0) return 0;
  // The rows are locked first, in a statement of their own: a metadata PATCH holding one commits
  // before the delete below takes its snapshot, which then sees the labels that PATCH added (in
  // one statement, the label delete would miss them and leave them without their sample).
  await tx.execute(sql`
    select id from samples where id = any(${textArray(ids)}) and pipeline_id = ${pipelineId} order by id for update`);
  if (options.datasets !== false) await tellDatasets(tx, pipelineId, ids, options.datasets !== "mark");
  // The labels go by their primary key, from each sample's own metadata and created_at.
  const [deleted] = await tx.execute<{ n: number }>(sql`
    with d as (
      delete from samples where id = any(${textArray(ids)}) and pipeline_id = ${pipelineId}
      returning id, pipeline_id, created_at, metadata
    ), l as (
      delete from sample_labels l using d, jsonb_each_text(coalesce(d.metadata, '{}'::jsonb)) kv
      where l.pipeline_id = d.pipeline_id and l.key = kv.key and l.value = kv.value collate "C"
        and l.created_at = d.created_at and l.sample_id = d.id
    )
    select count(*)::int as n from d`);
  return deleted?.n ?? 0;
}

/**
 * Times a PROCESSING dataset is sent back to the queue by deletions of samples it may hold; after
 * that it goes on and is marked, as retention does. Before, deletions that came more often than
 * one packaging run took (a moderation job, a client deleting by id) sent it back every time, and
 * as a restart is not an attempt, it stayed PROCESSING for good.
 */
export const DELETION_RESTARTS = 3;

/**
 * The datasets part of removeSamples: mark or requeue the datasets that may hold `ids`. Without
 * `requeue` (retention), a PROCESSING one is marked as a READY one is, and goes on; with it, a
 * PROCESSING one starts over, at most DELETION_RESTARTS times.
 */
async function tellDatasets(tx: DbOrTx, pipelineId: string, ids: string[], requeue: boolean): Promise<void> {
  const datasets = await tx.execute<DatasetRow>(sql`
    select id, filter, until_created_at::text as until_created_at, until_sample_id from datasets
    where pipeline_id = ${pipelineId} and deleted_at is null and until_sample_id is not null
      and (status = 'PROCESSING' or (status = 'READY' and not contains_deleted_samples))`);
  const hit: string[] = [];
  for (const d of datasets) {
    const bound = { createdAt: d.until_created_at, sampleId: d.until_sample_id };
    // A relabelled sample may have matched the dataset's metadata conditions when it was packaged,
    // under labels it no longer has: for it they are not checked (before, relabelling a sample and
    // then deleting it left `containsDeletedSamples` false on a file that holds it).
    const [row] = await tx.execute<{ hit: boolean }>(sql`
      select exists (select 1 from samples s where s.id = any(${textArray(ids)})
        and ${withinBound({ ts: sql`s.created_at`, id: sql`s.id` }, bound)}
        and ${samplePredicate(sql`s`, { ...d.filter, metadata: undefined })}
        and (s.relabelled or ${samplePredicate(sql`s`, { metadata: d.filter.metadata })})) as hit`);
    if (row?.hit) hit.push(d.id);
  }
  if (hit.length === 0) return;
  // Every expression reads the row as it was: `restart` is decided once for all of them. A
  // PROCESSING dataset no worker holds (queued, or waiting to retry) needs nothing: its next
  // claim reads the selection without the sample.
  const leased = sql`(status = 'PROCESSING' and lease_owner is not null)`;
  const restart = sql`(${leased} and restarts < ${DELETION_RESTARTS})`;
  const told = requeue
    ? sql`
        contains_deleted_samples = contains_deleted_samples or status = 'READY' or (${leased} and not ${restart}),
        restarts = case when ${restart} then restarts + 1 else restarts end,
        attempts = case when ${restart} then greatest(attempts - 1, 0) else attempts end,
        lease_owner = case when ${restart} then null else lease_owner end,
        lease_expires_at = case when ${restart} then null else lease_expires_at end,
        progress = case when ${restart} then 0 else progress end`
    : sql`contains_deleted_samples = true`;
  await tx.execute(sql`
    update datasets set ${told}, updated_at = now() where id = any(${textArray(hit)}) and deleted_at is null`);
}

/** DELETE /v1/samples/:id: 404 for an unknown id, another team's, or one of a deleted pipeline. */
export async function deleteSample(db: DbOrTx, input: { teamId: string; id: string }): Promise<number> {
  return db.transaction(async (tx) => {
    const [row] = await tx.execute<{ pipeline_id: string }>(sql`
      select s.pipeline_id from samples s join pipelines p on p.id = s.pipeline_id
      where s.id = ${input.id} and p.team_id = ${input.teamId} and p.deleted_at is null`);
    const deleted = row ? await removeSamples(tx, row.pipeline_id, [input.id]) : 0;
    if (deleted === 0) throw notFound(`No sample with id '${input.id}'.`, "id");
    return deleted;
  });
}

/**
 * POST /v1/pipelines/:id/delete-samples: the samples matching the filters (or all of them) that
 * exist when it starts (the pipeline's newest sample is the bound, as for a dataset: samples
 * added meanwhile are kept), in batches of DELETE_BATCH, each its own transaction. Returns how
 * many it deleted. The pipeline must be the caller's (checked by the route).
 */
export async function deleteSelection(
  db: DbOrTx,
  input: { pipelineId: string; filters: DeleteSamplesInput; batch?: number },
): Promise<number> {
  const { all: _all, ...filters } = input.filters;
  const [last] = await db.execute<{ created_at: string; id: string }>(sql`
    select created_at::text as created_at, id from samples where pipeline_id = ${input.pipelineId}
    order by created_at desc, id desc limit 1`);
  if (!last) return 0;
  const bound = { createdAt: last.created_at, sampleId: last.id };
  let total = 0;
  // Each batch goes on after the last one's last sample: before, every batch read the pipeline
  // from its oldest sample again, and a filter no index drives (importId, a label condition over
  // few samples) read it once per batch.
  let after: { createdAt: string; id: string } | undefined;
  for (;;) {
    const src = selectionSource(input.pipelineId, filters as Selection, false);
    src.where.push(withinBound(src, bound));
    if (after) src.where.push(afterSample(src, after));
    const n = await db.transaction(async (tx) => {
      const rows = await tx.execute<{ id: string; created_at: string }>(sql`
        select ${src.id} as id, ${src.ts}::text as created_at from ${src.from} ${whereOf(src)}
        order by ${src.ts}, ${src.id} limit ${input.batch ?? DELETE_BATCH}`);
      const lastRow = rows.at(-1);
      if (lastRow) after = { createdAt: lastRow.created_at, id: lastRow.id };
      return {
        found: rows.length,
        deleted: await removeSamples(
          tx,
          input.pipelineId,
          rows.map((r) => r.id),
        ),
      };
    });
    total += n.deleted;
    if (n.found < (input.batch ?? DELETE_BATCH)) return total;
  }
}
