import { and, desc, eq, isNull, sql } from "drizzle-orm";
import type { BlobStore, SignedDownload } from "../blob";
import type { DatasetDto } from "../contracts/datasets";
import type { Selection } from "../contracts/pipelines";
import type { DbOrTx } from "../db/client";
import type { DatasetOptions, SplitName } from "../contracts/dataset-options";
import { datasets, deployments, type Dataset } from "../db/schema";
import { conflict, invalidRequest, notFound } from "../errors";
import { newId } from "../ids";
import { logger } from "../observe/log";
import { holdLivePipeline } from "./pipelines";
import { filteredCount, listedCount, type SelectionBound } from "./selection-query";

/** A selection's filters; absent keys are no filter. */
export type DatasetSelection = Partial<Selection>;

/** The blob keys of one dataset all live under this prefix (one file per packaging attempt). */
export const datasetBlobPrefix = (datasetId: string) => `datasets/${datasetId}/`;

export function toDatasetDto(row: Dataset, teamSlug: string): DatasetDto {
  return {
    id: row.id,
    name: row.name,
    teamId: row.teamId,
    datasetString: `${teamSlug}/${row.name}`,
    size: row.size,
    status: row.status,
    createdAt: row.createdAt.toISOString(),
    deletedAt: row.deletedAt?.toISOString() ?? null,
    pipelineId: row.pipelineId,
    filter: row.filter,
    progress: row.progress,
    bytes: row.bytes,
    checksum: row.checksum,
    error: row.error,
    containsDeletedSamples: row.containsDeletedSamples,
    options: row.options,
    stats: row.stats,
    files: row.files.map(({ key: _key, ...file }) => file),
  };
}

/**
 * Creates a PROCESSING dataset of a pipeline's selection; a worker packages it (dataset-jobs.ts).
 *
 * The selection is frozen here: under a `for update` lock on the pipeline row, which waits for
 * every `add` in flight (they lock it `for key share` before taking their created_at), the
 * newest sample becomes the dataset's bound. Every later sample sorts after it, and the
 * packager reads only up to it, so `size` and the file agree whatever the worker's timing.
 * The lock is held for one index step only; the count runs after it.
 */
export async function createDataset(
  db: DbOrTx,
  input: { teamId: string; pipelineId: string; name: string; selection: DatasetSelection; options?: DatasetOptions },
): Promise<Dataset> {
  const options = input.options ?? { format: "jsonl", compression: "none", dedupe: false };
  const tokenizerModel = options.tokenizer ? await tokenizerModelOf(db, input.teamId, options.tokenizer) : null;
  const bound = await db.transaction(async (tx): Promise<SelectionBound> => {
    await holdLivePipeline(tx, { teamId: input.teamId, id: input.pipelineId }, "update");
    const [last] = await tx.execute<{ created_at: string; id: string }>(sql`
      select created_at::text as created_at, id from samples where pipeline_id = ${input.pipelineId}
      order by created_at desc, id desc limit 1`);
    return last ? { createdAt: last.created_at, sampleId: last.id } : null;
  });
  const size = await countFrozenSelection(db, input.pipelineId, input.selection, bound);
  try {
    // The pipeline may have been deleted while the selection was counted: a dataset made after
    // its deletion FAILed its PROCESSING ones would be packaged from samples being purged.
    const [row] = await db.transaction(async (tx) => {
      await holdLivePipeline(tx, { teamId: input.teamId, id: input.pipelineId });
      return tx
        .insert(datasets)
        .values({
          id: newId("dataset"),
          teamId: input.teamId,
          pipelineId: input.pipelineId,
          name: input.name,
          filter: input.selection,
          options,
          tokenizerModel,
          size,
          untilCreatedAt: bound?.createdAt ?? null,
          untilSampleId: bound?.sampleId ?? null,
        })
        .returning();
    });
    return row!;
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`A dataset named '${input.name}' already exists.`, "name");
    throw err;
  }
}

async function countFrozenSelection(
  db: DbOrTx,
  pipelineId: string,
  selection: DatasetSelection,
  bound: SelectionBound,
): Promise<number> {
  if (!bound) return 0;
  return listedCount(selection, await filteredCount(db, pipelineId, selection as Selection, bound));
}

/** The model of the team's deployment named `name`; another team's name is as unknown (400). */
async function tokenizerModelOf(db: DbOrTx, teamId: string, name: string): Promise<string> {
  const [row] = await db
    .select({ model: deployments.model })
    .from(deployments)
    .where(and(eq(deployments.teamId, teamId), eq(deployments.name, name)));
  if (!row) throw invalidRequest(`Invalid 'tokenizer': no deployment named '${name}' in this team.`, "tokenizer");
  return row.model;
}

function isUniqueViolation(err: unknown): boolean {
  for (let e: any = err; e; e = e.cause) if (e.code === "23505") return true;
  return false;
}

/** A team's datasets that are not deleted, newest first. */
export async function listDatasets(db: DbOrTx, teamId: string): Promise<Dataset[]> {
  return db
    .select()
    .from(datasets)
    .where(and(eq(datasets.teamId, teamId), isNull(datasets.deletedAt)))
    .orderBy(desc(datasets.createdAt), desc(datasets.id));
}

/** One dataset of the team; deleted and other teams' datasets are not found. */
export async function getDataset(db: DbOrTx, input: { teamId: string; id: string }): Promise<Dataset> {
  const [row] = await db
    .select()
    .from(datasets)
    .where(and(eq(datasets.id, input.id), eq(datasets.teamId, input.teamId), isNull(datasets.deletedAt)));
  if (!row) throw datasetNotFound(input.id);
  return row;
}

/**
 * Marks the dataset deleted (its name becomes free) and removes its files. A worker still
 * packaging it loses its lease at its next renewal and removes what it wrote.
 */
export async function deleteDataset(
  db: DbOrTx,
  blobs: BlobStore,
  input: { teamId: string; id: string },
): Promise<Dataset> {
  const [row] = await db
    .update(datasets)
    .set({ deletedAt: sql`now()`, updatedAt: sql`now()`, leaseOwner: null, leaseExpiresAt: null })
    .where(and(eq(datasets.id, input.id), eq(datasets.teamId, input.teamId), isNull(datasets.deletedAt)))
    .returning();
  if (!row) throw datasetNotFound(input.id);
  // The delete stands whatever the blob store says: files it fails to remove now are removed by
  // the workers' maintenance (sweepDeletedDatasetFiles). Before, the caller got a 500 for a
  // delete that had been done, and the files stayed for good.
  await removeDatasetFiles(db, blobs, row.id).catch((err: unknown) =>
    logger().warn({ err, dataset: row.id }, "dataset files not removed; maintenance will retry"),
  );
  return row;
}

/** Removes a deleted dataset's files, then forgets them (so that the sweep passes it over). */
async function removeDatasetFiles(db: DbOrTx, blobs: BlobStore, id: string): Promise<void> {
  await blobs.removePrefix(datasetBlobPrefix(id));
  await db.execute(sql`
    update datasets set blob_key = null, files = '[]'::jsonb where id = ${id} and deleted_at is not null`);
}

/** Maintenance: the files of deleted datasets that their delete could not remove; returns how many datasets. */
export async function sweepDeletedDatasetFiles(db: DbOrTx, blobs: BlobStore, limit = 100): Promise<number> {
  const rows = await db.execute<{ id: string }>(sql`
    select id from datasets where deleted_at is not null and (blob_key is not null or files <> '[]'::jsonb)
    order by deleted_at limit ${limit}`);
  let removed = 0;
  for (const { id } of rows) {
    try {
      await removeDatasetFiles(db, blobs, id);
      removed++;
    } catch (err) {
      logger().warn({ err, dataset: id }, "deleted dataset's files not removed; retrying at the next run");
    }
  }
  return removed;
}

/**
 * A signed, expiring URL of one file of a READY dataset (409 while PROCESSING or when FAILED):
 * its only file, or with `split` the one named by `split` (400 when missing, or given for a
 * dataset without split).
 */
export async function datasetDownload(
  db: DbOrTx,
  blobs: BlobStore,
  input: { teamId: string; id: string; ttlSeconds: number; split?: SplitName },
): Promise<SignedDownload> {
  const row = await getDataset(db, input);
  if (row.status === "PROCESSING") {
    throw conflict(`Dataset '${row.id}' is still PROCESSING (${row.progress} of ${row.size} samples read).`);
  }
  if (row.status === "FAILED") throw conflict(`Dataset '${row.id}' FAILED: ${row.error ?? "no file was produced"}`);
  if (row.options.split && !input.split) {
    throw invalidRequest("This dataset is split: name the file with ?split=train or ?split=validation.", "split");
  }
  if (!row.options.split && input.split) {
    throw invalidRequest("This dataset has no split: download it without 'split'.", "split");
  }
  const file = row.files.find((f) => f.split === (input.split ?? null));
  if (!file) throw conflict(`Dataset '${row.id}' has no file for this split.`);
  return blobs.downloadUrl(file.key, { ttlSeconds: input.ttlSeconds, filename: file.name });
}

export function datasetNotFound(id: string) {
  return notFound(`No dataset with id '${id}'.`, "id");
}
