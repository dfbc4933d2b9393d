import type { Readable } from "node:stream";
import { finished } from "node:stream/promises";
import { sql, type SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { BinaryCopyRows, type CopyRowBatch } from "../db/copy-binary";
import { inlineParams } from "../db/copy-statement";
import { rawSql } from "../db/raw";
import type { Selection } from "../contracts/pipelines";
import type { DbOrTx } from "../db/client";
import type { DatasetFile, DatasetOptions, DatasetStats } from "../contracts/dataset-options";
import type { DatasetSelection } from "./datasets";
import { selectionRows, whereOf, type SelectionBound } from "./selection-query";
import { retryDelay } from "./job-retry";
import { jobTeamsCondition, type JobTeams } from "./job-teams";

/** A dataset's `split` option: the share, the seed and what goes to one side together. */
type Split = NonNullable<DatasetOptions["split"]>;

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
  options: DatasetOptions;
  /** The `tokenizer` deployment's model, read at creation. */
  tokenizerModel: string | null;
  /** Samples selected at creation. */
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
  options: DatasetOptions;
  tokenizer_model: string | null;
  size: number;
  until_created_at: string | null;
  until_sample_id: string | null;
  attempts: number;
};

const leaseHeld = (id: string, owner: string) =>
  sql`id = ${id} and lease_owner = ${owner} and status = 'PROCESSING' and deleted_at is null`;

/**
 * Claims a PROCESSING dataset whose lease is free or expired (a crashed worker's job comes back
 * here once its lease runs out): of the team with the fewest datasets being packaged right now,
 * then of the team whose last claim is oldest (or that never had one), the oldest. So teams take
 * turns: one team's long queue never starves another team's dataset (before, with one worker
 * every team had none running at each claim, and the oldest dataset won: a team's fifty went
 * first).
 * SKIP LOCKED: concurrent claimers never wait on each other or get the same row.
 */
export async function claimDataset(
  db: DbOrTx,
  input: { owner: string; leaseSeconds: number; teams?: JobTeams },
): Promise<DatasetJob | undefined> {
  const [row] = await db.execute<JobRow>(sql`
    with c as (
      select id, team_id from datasets q
      where status = 'PROCESSING' and deleted_at is null and (lease_expires_at is null or lease_expires_at < now())
        and ${jobTeamsCondition(input.teams)}
      order by (select count(*) from datasets r
                where r.team_id = q.team_id and r.status = 'PROCESSING' and r.lease_owner is not null
                 and r.lease_expires_at >= now()),
               (select t.turn_at from dataset_turns t where t.team_id = q.team_id) nulls first,
               created_at, id
      limit 1
      for update skip locked
    ), turn as (
      insert into dataset_turns (team_id, turn_at) select team_id, clock_timestamp() from c
      on conflict (team_id) do update set turn_at = excluded.turn_at
    )
    update datasets d
    set lease_owner = ${input.owner}, lease_expires_at = now() + make_interval(secs => ${input.leaseSeconds}),
        attempts = d.attempts + 1, progress = 0, updated_at = now()
    from c
    where d.id = c.id
    returning d.id, d.name, d.pipeline_id, d.filter, d.options, d.tokenizer_model, d.size, d.until_created_at::text as until_created_at,
              d.until_sample_id, d.attempts`);
  if (!row) return undefined;
  return {
    id: row.id,
    name: row.name,
    pipelineId: row.pipeline_id,
    selection: row.filter,
    options: row.options,
    tokenizerModel: row.tokenizer_model,
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
                        progress = least(${input.progress}, size), updated_at = now()
    where ${leaseHeld(input.id, input.owner)}
    returning id`);
  return rows.length > 0;
}

/**
 * PROCESSING → READY with the published files and what packaging counted (`size` becomes the
 * samples written); false when the lease was lost meanwhile.
 */
export async function completeDataset(
  db: DbOrTx,
  input: { id: string; owner: string; files: StoredFile[]; stats: DatasetStats; progress: number },
): Promise<boolean> {
  const bytes = input.files.reduce((sum, f) => sum + f.bytes, 0);
  const checksum = input.files.length === 1 ? input.files[0]!.checksum : null;
  const rows = await db.execute(sql`
    update datasets set status = 'READY', blob_key = ${input.files[0]?.key ?? null}, bytes = ${bytes},
                        checksum = ${checksum}, files = ${JSON.stringify(input.files)}::jsonb,
                        stats = ${JSON.stringify(input.stats)}::jsonb, size = ${input.stats.included},
                        progress = ${input.progress}, error = null,
                        lease_owner = null, lease_expires_at = null, updated_at = now()
    where ${leaseHeld(input.id, input.owner)}
    returning id`);
  return rows.length > 0;
}

/** A dataset file as the row keeps it: the public fields and its blob key. */
export type StoredFile = DatasetFile & { key: string };

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
  // A failed attempt waits before the next claim (retryDelay): before, it was claimed again at
  // once, and a blip (the hub answering 429 for the tokenizer, the object store away for a few
  // seconds) spent every attempt in seconds and failed the dataset for good.
  await db.execute(sql`
    update datasets set lease_owner = null, progress = 0, updated_at = now(),
                        lease_expires_at = ${input.countAttempt ? sql`now() + ${retryDelay(sql`attempts`)}` : sql`null`},
                        attempts = attempts - ${input.countAttempt ? 0 : 1}
    where ${leaseHeld(input.id, input.owner)}`);
}

/** What each row of the frozen selection holds (see datasetRows). */
export type RowColumns = "line" | "parquet";

/**
 * Per sample, one line of JSON (with no raw newline: JSON text escapes it): the JSONL line
 * `{"messages": [...]}` (with `, "tools": [...]` when it has tools), or for Parquet the whole
 * record that workers/packager/parquet-file.ts reads: `{"f": [id, userId, groupId, metadata as
 * JSON text, tools as JSON text],
 * "createdAt": "<timestamptz as Postgres writes it in UTC>", "messages": [...]}`. One
 * json_build_array and the timestamp's own text cost Postgres less than a to_json per string and
 * the epoch in µs (numeric arithmetic): 2.31 s against 2.53 s at 1M samples (best of four
 * server-side COPYs; the messages alone: 1.49 s). Postgres's rendering is what a Parquet file
 * waits on.
 */
const COLUMNS: Record<RowColumns, SQL> = {
  // A sample's tools after its messages, as OpenAI's chat fine-tuning lines have them.
  line: sql`'{"messages": ' || s.messages::text || coalesce(', "tools": ' || s.tools::text, '') || '}'`,
  parquet: sql`'{"f": ' || json_build_array(s.id, s.user_id, s.group_id, s.metadata::text, s.tools::text)::text ||
    ', "createdAt": "' || s.created_at::text || '", "messages": ' || s.messages::text || '}'`,
};

/**
 * The split side in SQL, the formula docs/api.md documents ("split"):
 * 1 when the first 6 bytes of SHA-256(`<seed>:<id>`), big-endian, over 2^48 are below
 * `validation`, else 0. Postgres computes it on its own core while the worker handles the rows.
 * As one comparison of bytes: with v those 6 bytes and f the fraction, v / 2^48 < f (exact in
 * float8, as in JavaScript) holds exactly when v < ceil(f × 2^48) = T, and a digest compares
 * below T's 6 bytes (big-endian, byte by byte) exactly when v < T (a digest whose first 6 bytes
 * equal T's is longer, so greater). Measured at 1M samples (best of four server-side COPYs): the
 * lines alone 1.42 s, with the side 2.31 s, 2.49 s with arithmetic on the bytes' hex text
 * instead. SHA-256 is most of the rest (Postgres sets up a hash context per call).
 */
export function splitSideSql(split: Split): SQL {
  // by group: a conversation's turns (one groupId), or one captured request's n choices, share a
  // side; by user: one user's samples (their phrasing, their topics); by sample, near-copies of a
  // validation sample could sit in train (optimistic losses). The key is prefixed by what it is,
  // so a userId equal to a sample id or a groupId does not pick that one's side.
  const key =
    split.by === "group"
      ? sql`coalesce(s.group_id, s.generation->>'requestId', s.id)`
      : split.by === "user"
        ? sql`coalesce('user:' || s.user_id, s.id)`
        : sql`s.id`;
  const digest = sql`sha256(convert_to(${`${split.seed}:`} || ${key}, 'UTF8'))`;
  const bound = Math.ceil(split.validation * 2 ** 48);
  if (bound >= 2 ** 48) return sql`1`; // every 6 bytes are below it
  return sql`(${digest} < decode(${bound.toString(16).padStart(12, "0")}, 'hex'))::int`;
}

/**
 * The frozen selection in selection order as `COPY (SELECT …) TO STDOUT` in binary format, one
 * row per sample with `columns`, and with `split` the sample's split side after it
 * (splitSideSql: 1 validation, 0 train).
 */
function copyStatement(
  job: Pick<DatasetJob, "pipelineId" | "selection">,
  bound: NonNullable<SelectionBound>,
  columns: RowColumns,
  split: Split | undefined,
): string {
  const src = selectionRows(job.pipelineId, job.selection as Selection, { withSamples: true, bound });
  const query = new PgDialect().sqlToQuery(sql`
    copy (
      select ${COLUMNS[columns]}${split ? sql`, ${splitSideSql(split)}` : sql``} from ${src.from}
      ${whereOf(src)}
      order by ${src.ts}, ${src.id}
      ${job.selection.limit !== undefined ? sql`limit ${job.selection.limit}` : sql``} offset ${job.selection.offset ?? 0}
    ) to stdout (format binary)`);
  return inlineParams(query.sql, query.params);
}

/**
 * The frozen selection's rows, for packaging: the line of `columns` (field 0), and with `split`
 * the side as a 4-byte integer (field 1, its last byte 1 for validation). Postgres renders the
 * rows and sends them with one COPY: the fastest way out of the server, streamed with
 * backpressure in flat memory (rowBatches).
 *
 * Binary COPY: Postgres sends each field's bytes as they are, behind their length, and each row
 * in a message of its own, which the rows are read in where they arrived. Text COPY's escaping
 * (a backslash before every backslash of the JSON text: every quote and line break of a message)
 * cost Postgres a pass over every byte and the packager a copy of every chunk that had one, and
 * its chunks were concatenated twice (by the stream, then across cut lines): with chat text that
 * has escapes, a plain JSONL export took 30% less of the worker's CPU in binary (2.2–2.4 s
 * against 3.2–3.8 s per million samples) and options 10–30% less time.
 *
 * A connection of its own: nothing else may be queued behind the COPY on its socket. A file
 * takes as long as it takes: the pool's statement timeout is lifted for the COPY. No parallel
 * plan: where the rendering of a row is costly (the Parquet record's), Postgres would otherwise
 * sort the whole selection in parallel workers before sending the first row (1M samples: 1.5 s
 * of two cores' work, the first row only then), where the order index streams it from the start
 * on one core and leaves the other to the packager. Times are written in UTC (the Parquet
 * record's); the selection's own bounds all carry their offset. All three are settings of the
 * COPY's transaction only (SET LOCAL): the connection goes back to the pool as it came.
 */
export async function* datasetRows(
  db: DbOrTx,
  job: Pick<DatasetJob, "pipelineId" | "selection" | "bound">,
  columns: RowColumns,
  split?: Split,
  signal?: AbortSignal,
): AsyncGenerator<CopyRowBatch> {
  if (!job.bound) return;
  const statement = copyStatement(job, job.bound, columns, split);
  const reserved = await rawSql(db).reserve();
  let stream: Readable | undefined;
  let read = false;
  // Stopped early (the job given back at shutdown, its lease lost, the dataset deleted), at any
  // point (Postgres may wait on a lock, or sort a sampled selection, for long before the first
  // row): the COPY is cancelled, rather than the rest of the selection read and thrown away
  // (minutes for a large one, past the shutdown's grace).
  let copy: { cancel: () => unknown } | undefined;
  let cancelled = false;
  const cancel = () => {
    if (read || !copy || cancelled) return;
    cancelled = true;
    void Promise.resolve(copy.cancel()).catch(() => {});
  };
  signal?.addEventListener("abort", cancel, { once: true });
  try {
    await reserved.unsafe(
      "begin; set local statement_timeout = 0; set local max_parallel_workers_per_gather = 0; set local timezone = 'UTC'",
    );
    const query = reserved.unsafe(statement);
    copy = query;
    if (signal?.aborted) cancel();
    stream = await query.readable();
    yield* rowBatches(stream, split ? 2 : 1, signal);
    read = true;
  } finally {
    signal?.removeEventListener("abort", cancel);
    if (stream && !read && !stream.readableEnded) cancel();
    if (stream) await settleCopy(stream); // after a cancel, only until its error arrives
    // A cancel that reached the server after the COPY had ended may cancel the next statement
    // instead: the rollback is then sent again (a cancel stops one statement at most).
    for (let tries = cancelled ? 2 : 1; tries > 0; tries--) {
      const error = await reserved.unsafe("rollback").then(
        () => undefined,
        (e: { code?: string }) => e,
      );
      if (error?.code !== "57014") break;
    }
    reserved.release();
  }
}

/** Bytes of rows read ahead of the packager before the COPY is paused (its socket then fills). */
const ROWS_AHEAD_BYTES = 1024 * 1024;

/**
 * A binary COPY stream's rows of `fields` fields, in batches: the rows that arrived while the
 * packager was busy. The COPY is paused when the packager falls more than ROWS_AHEAD_BYTES
 * behind, and resumed when it takes the next batch.
 */
async function* rowBatches(stream: Readable, fields: number, signal?: AbortSignal): AsyncGenerator<CopyRowBatch> {
  const rows = new BinaryCopyRows(fields);
  let failure: { error: unknown } | undefined;
  let ended = false;
  let ahead = 0;
  let wake: (() => void) | undefined;
  const notify = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  const onData = (message: Buffer) => {
    try {
      rows.push(message);
    } catch (error) {
      failure ??= { error };
    }
    ahead += message.length;
    if (ahead >= ROWS_AHEAD_BYTES || failure) stream.pause();
    notify();
  };
  const onEnd = () => {
    ended = true;
    notify();
  };
  const onError = (error: unknown) => {
    failure ??= { error };
    notify();
  };
  // Stopped while waiting for rows (Postgres may sort a sampled selection for a long while
  // before the first): the wait ends at once.
  const onAbort = () => onError(signal!.reason);
  stream.on("data", onData);
  stream.once("end", onEnd);
  stream.once("error", onError);
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    if (signal?.aborted) onAbort();
    for (;;) {
      if (failure) throw failure.error;
      if (rows.count > 0) {
        const batch = rows.take();
        ahead = 0;
        if (stream.isPaused()) stream.resume();
        yield batch;
      } else if (ended) break;
      else await new Promise<void>((resolve) => (wake = resolve));
    }
    if (!rows.ended) throw new Error("the COPY ended without its trailer");
  } finally {
    stream.off("data", onData);
    stream.off("end", onEnd);
    stream.off("error", onError);
    signal?.removeEventListener("abort", onAbort);
  }
}

/**
 * Leaves the COPY's connection usable. postgres.js pauses the socket when the stream's buffer is
 * full and resumes it only from the stream's `_read`, which Node never calls once the stream has
 * ended (as when the last rows and the end of the COPY arrive in one read): resume it here, after
 * the end. A COPY cancelled early is read only until the cancel's error arrives.
 */
export async function settleCopy(stream: Readable): Promise<void> {
  const resumeSocket = () => (stream as unknown as { _read: (n: number) => void })._read(0);
  if (!stream.readableEnded) {
    stream.resume();
    resumeSocket();
    await finished(stream).catch(() => {});
  }
  resumeSocket();
}
