import type { Readable } from "node:stream";
import { finished } from "node:stream/promises";
import { sql } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { copyTextUnescaper, countNewlines, inlineParams } from "../db/copy-text";
import { rawSql } from "../db/raw";
import type { Selection } from "../contracts/pipelines";
import type { DbOrTx } from "../db/client";
import { withinBound, type DatasetSelection, type SelectionBound } from "./datasets";
import { selectionSource } from "./samples";

/**
 * The packager's side of datasets: claiming PROCESSING rows under a lease, renewing it,
 * reading the frozen selection as JSONL, and the fenced transitions to READY or FAILED.
 * Every write after the claim is conditional on still holding the lease (`lease_owner`,
 * PROCESSING, not deleted), so a worker that lost its job to another can change nothing.
 */
export type DatasetJob = {
  id: string;
  name: string;
  pipelineId: string;
  selection: DatasetSelection;
  size: number;
  bound: SelectionBound;
  /** Claims so far, this one included. */
  attempts: number;
};

type JobRow = {
  id: string;
  name: string;
  pipeline_id: string;
  filter: DatasetSelection;
  size: number;
  until_created_at: string | null;
  until_sample_id: string | null;
  attempts: number;
};

const leaseHeld = (id: string, owner: string) =>
  sql`id = ${id} and lease_owner = ${owner} and status = 'PROCESSING' and deleted_at is null`;

/**
 * Claims the oldest PROCESSING dataset whose lease is free or expired (a crashed worker's job
 * comes back here once its lease runs out). SKIP LOCKED: concurrent claimers never wait on
 * each other or get the same row.
 */
export async function claimDataset(
  db: DbOrTx,
  input: { owner: string; leaseSeconds: number },
): Promise<DatasetJob | undefined> {
  const [row] = await db.execute<JobRow>(sql`
    update datasets d
    set lease_owner = ${input.owner}, lease_expires_at = now() + make_interval(secs => ${input.leaseSeconds}),
        attempts = d.attempts + 1, progress = 0, updated_at = now()
    from (
      select id from datasets
      where status = 'PROCESSING' and deleted_at is null and (lease_expires_at is null or lease_expires_at < now())
      order by created_at, id
      limit 1
      for update skip locked
    ) c
    where d.id = c.id
    returning d.id, d.name, d.pipeline_id, d.filter, d.size, d.until_created_at::text as until_created_at,
              d.until_sample_id, d.attempts`);
  if (!row) return undefined;
  return {
    id: row.id,
    name: row.name,
    pipelineId: row.pipeline_id,
    selection: row.filter,
    size: row.size,
    bound: row.until_created_at ? { createdAt: row.until_created_at, sampleId: row.until_sample_id! } : null,
    attempts: row.attempts,
  };
}

/** Extends the lease and records progress; false when the lease is lost (taken over or deleted). */
export async function renewDatasetLease(
  db: DbOrTx,
  input: { id: string; owner: string; leaseSeconds: number; progress: number },
): Promise<boolean> {
  const rows = await db.execute(sql`
    update datasets set lease_expires_at = now() + make_interval(secs => ${input.leaseSeconds}),
                        progress = ${input.progress}, updated_at = now()
    where ${leaseHeld(input.id, input.owner)}
    returning id`);
  return rows.length > 0;
}

/** PROCESSING → READY with the published file; false when the lease was lost meanwhile. */
export async function completeDataset(
  db: DbOrTx,
  input: { id: string; owner: string; blobKey: string; bytes: number; checksum: string; progress: number },
): Promise<boolean> {
  const rows = await db.execute(sql`
    update datasets set status = 'READY', blob_key = ${input.blobKey}, bytes = ${input.bytes},
                        checksum = ${input.checksum}, progress = ${input.progress}, error = null,
                        lease_owner = null, lease_expires_at = null, updated_at = now()
    where ${leaseHeld(input.id, input.owner)}
    returning id`);
  return rows.length > 0;
}

/** PROCESSING → FAILED with a reason the user may read; false when the lease was lost meanwhile. */
export async function failDataset(db: DbOrTx, input: { id: string; owner: string; reason: string }): Promise<boolean> {
  const rows = await db.execute(sql`
    update datasets set status = 'FAILED', error = ${input.reason},
                        lease_owner = null, lease_expires_at = null, updated_at = now()
    where ${leaseHeld(input.id, input.owner)}
    returning id`);
  return rows.length > 0;
}

/**
 * Gives the job back for another claim (status stays PROCESSING). `countAttempt: false` (a
 * worker shutting down) does not count this claim towards DATASET_MAX_ATTEMPTS.
 */
export async function releaseDataset(
  db: DbOrTx,
  input: { id: string; owner: string; countAttempt: boolean },
): Promise<void> {
  await db.execute(sql`
    update datasets set lease_owner = null, lease_expires_at = null, progress = 0, updated_at = now(),
                        attempts = attempts - ${input.countAttempt ? 0 : 1}
    where ${leaseHeld(input.id, input.owner)}`);
}

export type JsonlChunk = { chunk: Buffer; count: number };

/**
 * The frozen selection as JSONL, one `{"messages": [...]}` line per sample, in selection order;
 * Postgres renders the lines. Two readers of the same query, chosen by the server:
 * - real Postgres: one `COPY (SELECT line …) TO STDOUT`, streamed with backpressure — the
 *   fastest way out of the server (about the time of COPYing the messages alone), flat memory;
 * - the embedded database (PGlite, one backend shared by every process): keyset batches of
 *   `batchSize`, each a short statement, so the app is never locked out for the whole file.
 */
export async function* datasetJsonl(
  db: DbOrTx,
  job: Pick<DatasetJob, "pipelineId" | "selection" | "bound">,
  options: { batchSize: number },
): AsyncGenerator<JsonlChunk> {
  if (!job.bound) return;
  if (await isEmbedded(db)) yield* keysetJsonl(db, job, options.batchSize);
  else yield* copyJsonl(db, job);
}

const LINE = sql`'{"messages": ' || s.messages::text || '}'`;

const embedded = new WeakMap<object, Promise<boolean>>();
function isEmbedded(db: DbOrTx): Promise<boolean> {
  const client = rawSql(db);
  let known = embedded.get(client);
  if (!known) {
    known = client`select version() like '%PGlite%' as pglite`.then((rows) => Boolean(rows[0]?.pglite));
    embedded.set(client, known);
  }
  return known;
}

async function* copyJsonl(db: DbOrTx, job: Pick<DatasetJob, "pipelineId" | "selection" | "bound">) {
  const src = selectionSource(job.pipelineId, job.selection as Selection, true);
  const where = [...src.where, withinBound(src, job.bound!)];
  const query = new PgDialect().sqlToQuery(sql`
    copy (
      select ${LINE} from ${src.from}
      where ${sql.join(where, sql` and `)}
      order by ${src.ts}, ${src.id}
      ${job.selection.limit !== undefined ? sql`limit ${job.selection.limit}` : sql``} offset ${job.selection.offset ?? 0}
    ) to stdout`);
  // A connection of its own: nothing else may be queued behind the COPY on its socket.
  const reserved = await rawSql(db).reserve();
  const stream = await reserved.unsafe(inlineParams(query.sql, query.params)).readable();
  const unescape = copyTextUnescaper();
  try {
    for await (const raw of stream.iterator({ destroyOnReturn: false })) {
      const chunk = raw as Buffer;
      yield { chunk: unescape(chunk), count: countNewlines(chunk) };
    }
  } finally {
    await settleCopy(stream);
    reserved.release();
  }
}

/**
 * Leaves the COPY's connection usable. postgres.js pauses the socket when the stream's buffer is
 * full and resumes it only from the stream's `_read`, which Node never calls once the stream has
 * ended (as when the last rows and the end of the COPY arrive in one read): resume it here, after
 * the end. A COPY stopped early (lease lost, shutdown) is drained first, its rest discarded (no
 * cancel request: one arriving late could cancel the connection's next query).
 */
async function settleCopy(stream: Readable): Promise<void> {
  const resumeSocket = () => (stream as unknown as { _read: (n: number) => void })._read(0);
  if (!stream.readableEnded) {
    stream.resume();
    resumeSocket();
    await finished(stream).catch(() => {});
  }
  resumeSocket();
}

/**
 * Keyset batches on (created_at, id); each batch is one row holding its lines concatenated (no
 * per-row work here). The next batch is fetched while the caller writes the current one.
 */
async function* keysetJsonl(
  db: DbOrTx,
  job: Pick<DatasetJob, "pipelineId" | "selection" | "bound">,
  batchSize: number,
): AsyncGenerator<JsonlChunk> {
  const src = selectionSource(job.pipelineId, job.selection as Selection, true);
  const base = [...src.where, withinBound(src, job.bound!)];
  let remaining = job.selection.limit ?? Number.POSITIVE_INFINITY;
  type Row = { lines: string | null; n: number; last_ts: string | null; last_id: string | null };
  const fetchBatch = async (after: { ts: string; id: string } | undefined, size: number) => {
    const where = after ? [...base, sql`(${src.ts}, ${src.id}) > (${after.ts}::timestamptz, ${after.id})`] : base;
    const [row] = await db.execute<Row>(sql`
      with b as materialized (
        select ${src.ts} as ts, ${src.id} as id, ${LINE} as line
        from ${src.from}
        where ${sql.join(where, sql` and `)}
        order by ${src.ts}, ${src.id}
        limit ${size} offset ${after ? 0 : (job.selection.offset ?? 0)}
      )
      select (select string_agg(b.line || E'\n', '' order by b.ts, b.id) from b) as lines,
             (select count(*)::int from b) as n,
             (select b.ts::text from b order by b.ts desc, b.id desc limit 1) as last_ts,
             (select b.id from b order by b.ts desc, b.id desc limit 1) as last_id`);
    return row!;
  };
  let next: Promise<Row> | undefined = fetchBatch(undefined, Math.min(batchSize, remaining));
  try {
    while (next) {
      const size = Math.min(batchSize, remaining);
      const row: Row = await next;
      next = undefined;
      remaining -= row.n;
      if (row.n === size && remaining > 0) {
        next = fetchBatch({ ts: row.last_ts!, id: row.last_id! }, Math.min(batchSize, remaining));
      }
      if (row.n > 0) yield { chunk: Buffer.from(row.lines!, "utf8"), count: row.n };
    }
  } finally {
    // The caller stopped early: let a prefetch in flight settle without an unhandled rejection.
    next?.catch(() => {});
  }
}
