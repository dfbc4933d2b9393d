import { sql } from "drizzle-orm";
import { MAX_IMPORT_REFUSALS, type ImportRefusal } from "../contracts/imports";
import type { DbOrTx } from "../db/client";
import { rawSql } from "../db/raw";
import { sampleInsertCtes, type NewSample } from "./sample-rows";
import { jobTeamsCondition, type JobTeams } from "./job-teams";
import { retryDelay } from "./job-retry";
import type { BlobStore } from "../blob";
import { logger } from "../observe/log";
import { importBlobPrefix } from "./imports";

/**
 * The worker's side of imports (workers/importer): claiming PROCESSING rows under a lease, and
 * storing the file chunk by chunk. Every write after the claim is fenced on still holding the
 * lease, and a chunk's samples commit together with the progress that says they are stored, so a
 * worker taking over (lease expired) resumes exactly after the last committed chunk.
 */
export type ImportJob = {
  id: string;
  teamId: string;
  pipelineId: string;
  blobKey: string;
  bytes: number;
  /** Where the next chunk starts, and the counts so far (from the last committed chunk). */
  bytesRead: number;
  linesRead: number;
  refusals: number;
  attempts: number;
};

/** The lease is lost: taken over after it expired, or the import was ended (pipeline deleted). */
export class ImportLeaseLost extends Error {
  constructor() {
    super("import lease lost");
    this.name = "ImportLeaseLost";
  }
}

/** The import's pipeline was deleted (after the import was created): nothing more can be stored. */
export class ImportPipelineGone extends Error {
  constructor() {
    super("the import's pipeline was deleted");
    this.name = "ImportPipelineGone";
  }
}

const leaseHeld = (id: string, owner: string) => sql`id = ${id} and lease_owner = ${owner} and status = 'PROCESSING'`;

/**
 * Claims a PROCESSING import whose lease is free or expired (SKIP LOCKED), team by team: of the
 * team with the fewest imports running now, then of the team whose last import ended longest ago
 * (or never), its oldest. So teams take turns: before, imports ran oldest first across all
 * teams, and one team's fifty uploads held another team's one back for hours.
 */
export async function claimImport(db: DbOrTx, input: { owner: string; leaseSeconds: number; teams?: JobTeams }) {
  const [row] = await db.execute<{
    id: string;
    team_id: string;
    pipeline_id: string;
    blob_key: string;
    bytes: number;
    bytes_read: number;
    lines_read: number;
    refusals: number;
    attempts: number;
  }>(sql`
    update imports i
    set lease_owner = ${input.owner}, lease_expires_at = now() + make_interval(secs => ${input.leaseSeconds}),
        attempts = i.attempts + 1, updated_at = now()
    from (
      select id from imports q
      where status = 'PROCESSING' and (lease_expires_at is null or lease_expires_at < now())
        and ${jobTeamsCondition(input.teams)}
      order by (select count(*) from imports r
                where r.team_id = q.team_id and r.status = 'PROCESSING' and r.lease_owner is not null
                  and r.lease_expires_at >= now()),
               (select max(r.updated_at) from imports r where r.team_id = q.team_id and r.status <> 'PROCESSING')
                 nulls first,
               created_at, id
      limit 1
      for update skip locked
    ) c
    where i.id = c.id
    returning i.id, i.team_id, i.pipeline_id, i.blob_key, i.bytes::float8 as bytes, i.bytes_read::float8 as bytes_read,
              i.lines_read, jsonb_array_length(i.refusals) as refusals, i.attempts`);
  if (!row) return undefined;
  return {
    id: row.id,
    teamId: row.team_id,
    pipelineId: row.pipeline_id,
    blobKey: row.blob_key,
    bytes: row.bytes,
    bytesRead: row.bytes_read,
    linesRead: row.lines_read,
    refusals: row.refusals,
    attempts: row.attempts,
  } satisfies ImportJob;
}

/** Extends the lease; false when it is lost. */
export async function renewImportLease(db: DbOrTx, input: { id: string; owner: string; leaseSeconds: number }) {
  const rows = await db.execute(sql`
    update imports set lease_expires_at = now() + make_interval(secs => ${input.leaseSeconds})
    where ${leaseHeld(input.id, input.owner)} returning id`);
  return rows.length > 0;
}

export type ImportChunk = {
  rows: NewSample[];
  /** The file offset after the chunk's last line, and its line count. */
  bytesRead: number;
  linesRead: number;
  refused: number;
  /** Refusals to keep (the caller stops sending them once MAX_IMPORT_REFUSALS are kept). */
  refusals: ImportRefusal[];
};

/**
 * Stores one chunk and its progress in one transaction, only while the lease is held (else
 * ImportLeaseLost, and nothing of the chunk is stored). Returns the samples stored (ids stored
 * before are skipped, so a line can never be stored twice); ImportPipelineGone when the pipeline
 * was deleted.
 */
export async function storeImportChunk(
  db: DbOrTx,
  input: { id: string; owner: string; leaseSeconds: number; chunk: ImportChunk },
): Promise<number> {
  const { chunk } = input;
  const sql = rawSql(db);
  // One statement (one round trip, its own transaction): the worker parses the next chunk while
  // this one is stored, and every extra round trip would wait for that parse to yield. The lease
  // row is locked first; the samples go in only while it is held, and the progress moves only if
  // they could go in (their pipeline is live), so nothing is written when either check fails.
  const [row] = await sql<{ held: boolean; live: boolean; stored: number }[]>`
    with lease as (
      select id from imports
      where id = ${input.id} and lease_owner = ${input.owner} and status = 'PROCESSING'
      for update
    ), ${sampleInsertCtes(sql, chunk.rows, { skipExisting: true, gate: sql`exists (select 1 from lease)` })},
    progress as (
      update imports set bytes_read = ${chunk.bytesRead}, lines_read = ${chunk.linesRead},
        refused = refused + ${chunk.refused},
        refusals = case when jsonb_array_length(refusals) < ${MAX_IMPORT_REFUSALS}
                        then refusals || ${JSON.stringify(chunk.refusals)}::jsonb else refusals end,
        imported = imported + (select count(*) from s),
        -- A claim that stores a chunk made progress: its failures start the count over (before,
        -- five worker restarts or blob read resets failed a long import that kept progressing).
        attempts = 1,
        lease_expires_at = now() + make_interval(secs => ${input.leaseSeconds}), updated_at = now()
      where id in (select id from lease) and (${chunk.rows.length} = 0 or exists (select 1 from p))
    )
    select exists (select 1 from lease) as held, exists (select 1 from p) as live,
           (select count(*) from s)::int as stored`;
  if (!row!.held) throw new ImportLeaseLost();
  if (chunk.rows.length > 0 && !row!.live) throw new ImportPipelineGone();
  return row!.stored;
}

/** PROCESSING → READY (fenced); false when the lease was lost. */
export async function completeImport(db: DbOrTx, input: { id: string; owner: string }): Promise<boolean> {
  const rows = await db.execute(sql`
    update imports set status = 'READY', lease_owner = null, lease_expires_at = null, updated_at = now()
    where ${leaseHeld(input.id, input.owner)} returning id`);
  return rows.length > 0;
}

/** PROCESSING → FAILED with a reason the user may read (fenced); false when the lease was lost. */
export async function failImport(db: DbOrTx, input: { id: string; owner: string; reason: string }) {
  const rows = await db.execute(sql`
    update imports set status = 'FAILED', error = ${input.reason}, lease_owner = null, lease_expires_at = null,
      updated_at = now()
    where ${leaseHeld(input.id, input.owner)} returning id`);
  return rows.length > 0;
}

/** Gives the import back for another claim; `countAttempt: false` (a worker stopping) does not count it. */
export async function releaseImport(db: DbOrTx, input: { id: string; owner: string; countAttempt: boolean }) {
  // A failed attempt waits before the next claim (retryDelay), as a dataset's does.
  await db.execute(sql`
    update imports set lease_owner = null, updated_at = now(),
      lease_expires_at = ${input.countAttempt ? sql`now() + ${retryDelay(sql`attempts`)}` : sql`null`},
      attempts = attempts - ${input.countAttempt ? 0 : 1}
    where ${leaseHeld(input.id, input.owner)}`);
}

/**
 * Removes a finished (READY or FAILED) import's uploaded file and says so in its row; a removal
 * that fails (the object store away) is logged and left to `sweepImportFiles`. Before, such a
 * file (up to 1 GiB of every line) stayed for good, even once its pipeline was deleted.
 */
export async function removeImportFile(db: DbOrTx, blobs: BlobStore, id: string): Promise<boolean> {
  try {
    await blobs.removePrefix(importBlobPrefix(id));
  } catch (err) {
    logger().warn({ err, import: id }, "import's uploaded file not removed; retrying at the next maintenance run");
    return false;
  }
  await db.execute(sql`update imports set file_removed = true where id = ${id}`);
  return true;
}

/** The workers' maintenance: the files of ended imports (READY, FAILED, CANCELLED) still there. */
export async function sweepImportFiles(db: DbOrTx, blobs: BlobStore, limit = 100): Promise<number> {
  const rows = await db.execute<{ id: string }>(sql`
    select id from imports where status <> 'PROCESSING' and not file_removed
    order by updated_at limit ${limit}`);
  let removed = 0;
  for (const { id } of rows) if (await removeImportFile(db, blobs, id)) removed++;
  return removed;
}
