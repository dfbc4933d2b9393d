import { and, eq, isNull, sql } from "drizzle-orm";
import type { DbOrTx } from "../db/client";
import { pipelines, samples } from "../db/schema";
import { invalidRequest, notFound } from "../errors";
import type postgres from "postgres";
import { createBatcher, perClient } from "../db/batch";
import { rawSql } from "../db/raw";
import type { GenerationFacts } from "../contracts/capture";
import { LIMITS, type AddSampleInput, type SampleDto, type Selection } from "../contracts/pipelines";
import { newId } from "../ids";
import { appMetrics, metricsEnabled } from "../observe/metrics";
import { signedUrl } from "../signing";
import { pipelineNotFound } from "./pipelines";
import { insertSampleRows, newSampleRow, SAMPLE_WRITERS, type NewSample } from "./sample-rows";
import { afterSample, filteredCount, listedCount, selectionRows, textArray, whereOf } from "./selection-query";

/**
 * Adds a sample and its metadata labels. Concurrent adds on one connection pool go out together
 * (see createBatcher): one statement, one commit for the lot, each add still answered only once
 * its own row is committed, and each checked on its own (an unknown pipeline fails that add alone).
 */
export async function addSample(
  db: DbOrTx,
  input: { teamId: string; pipelineId: string; sample: AddSampleInput },
): Promise<{ id: string }> {
  const row = newSampleRow(newId("sample"), input.pipelineId, input.teamId, input.sample);
  await sampleInserter(rawSql(db))(row);
  if (metricsEnabled()) appMetrics().samplesAdded.inc();
  return { id: row.id };
}

/**
 * Adds several samples to one pipeline (add-batch): queued together on the add batcher, so a
 * batch of 1,000 goes out as a few statements (each at most 256 rows or ~4 MB of JSON). One
 * result per input, in order: the new id, or the error of that sample alone.
 */
export async function addSamples(
  db: DbOrTx,
  input: { teamId: string; pipelineId: string; samples: AddSampleInput[] },
): Promise<({ id: string } | Error)[]> {
  const rows = input.samples.map((sample) => newSampleRow(newId("sample"), input.pipelineId, input.teamId, sample));
  const settled = await sampleInserter(rawSql(db)).many(rows);
  const stored = settled.filter((r) => r.status === "fulfilled").length;
  if (metricsEnabled() && stored > 0) appMetrics().samplesAdded.inc(stored);
  return settled.map((r, i) =>
    r.status === "fulfilled" ? { id: rows[i]!.id } : r.reason instanceof Error ? r.reason : new Error(String(r.reason)),
  );
}

/**
 * A sample for storeSamples: any pipeline, with a captured completion's generation facts. The id
 * is chosen once by the caller, so that a write retried after a failure that had in fact
 * committed (a connection lost after the commit) cannot store the sample twice.
 */
export type SampleToStore = {
  id: string;
  teamId: string;
  pipelineId: string;
  sample: AddSampleInput;
  generation?: GenerationFacts;
};

/**
 * Stores samples (captured completions) on the add batcher, like `add`: together with the adds of
 * the moment, each checked on its own against its pipeline and team. One result per input: the
 * new id, or why that sample was not stored (a 404 when its pipeline is gone).
 */
export async function storeSamples(db: DbOrTx, items: SampleToStore[]): Promise<PromiseSettledResult<string>[]> {
  const rows = items.map((i) => newSampleRow(i.id, i.pipelineId, i.teamId, i.sample, i.generation));
  const settled = await sampleInserter(rawSql(db)).many(rows);
  const stored = settled.filter((r) => r.status === "fulfilled").length;
  if (metricsEnabled() && stored > 0) appMetrics().samplesAdded.inc(stored);
  return settled;
}

/** The add batcher of a connection pool (see insertSampleRows for the statement). */
const sampleInserter = perClient((sql: postgres.Sql) =>
  createBatcher<NewSample, string>(
    async (rows) => {
      const done = await insertSampleRows(sql, rows);
      return rows.map((r) => (done.has(r.id) ? r.id : pipelineNotFound(r.pipelineId)));
    },
    // At most ~4 MB of JSON per statement (one add may be larger, up to MAX_BODY_BYTES).
    // A statement that fails (a row Postgres refuses despite validation) is retried add by add:
    // one team's bad add can never fail another team's adds in the same batch.
    { maxInFlight: 4, maxBatch: 256, weight: (r) => r.json.length, maxWeight: 4_000_000, isolateFailures: true },
  ),
);

type SampleRow = {
  id: string;
  length: number;
  pipeline_id: string;
  team_id: string;
  created_at: Date;
  created_at_text: string;
  user_id: string | null;
  group_id: string | null;
  metadata: Record<string, string> | null;
  generation?: GenerationFacts | null;
};

export function sampleContentPath(sampleId: string): string {
  return `/v1/samples/${sampleId}/content`;
}

export function toSampleDto(row: SampleRow, now = Date.now()): SampleDto {
  return {
    id: row.id,
    length: row.length,
    pipelineId: row.pipeline_id,
    teamId: row.team_id,
    createdAt: new Date(row.created_at).toISOString(),
    userId: row.user_id,
    groupId: row.group_id,
    metadata: row.metadata,
    url: signedUrl(sampleContentPath(row.id), undefined, now),
  };
}

/**
 * Streams a selection as sample DTOs in keyset-paginated batches: each batch continues after
 * the last (created_at, id) seen, on the same index as the order. Memory stays flat however
 * large the selection, and no cursor or transaction is held open while a slow client reads.
 */
export async function* streamSelection(
  db: DbOrTx,
  input: {
    pipelineId: string;
    selection: Selection;
    batch?: number;
    cursor?: CursorKey;
    /** The dashboard's preview: each sample with its generation facts (null unless captured). */
    withGeneration?: boolean;
  },
): AsyncGenerator<SampleDto & { generation?: GenerationFacts | null }> {
  // A sampled selection picks its rows again for each batch: fewer, larger batches.
  const batch = input.batch ?? (input.selection.sample ? 10_000 : 500);
  const horizon = await listingHorizon(db, input.pipelineId);
  const src = selectionRows(input.pipelineId, input.selection, {
    withSamples: true,
    bound: { createdAt: horizon, sampleId: "" }, // before the horizon (no id is "")
  });
  let remaining = input.selection.limit ?? Number.POSITIVE_INFINITY;
  // created_at travels as text: a JS Date would drop the microseconds and break the keyset.
  // A cursor (`after`) starts the keyset at its sample: a deep page reads what the first one does.
  let after: CursorKey | undefined = input.cursor;
  let offset = input.selection.offset ?? 0;
  while (remaining > 0) {
    const size = Math.min(batch, remaining);
    const where = after ? [...src.where, afterSample(src, after)] : src.where;
    const condition = where.length > 0 ? sql`where ${sql.join(where, sql` and `)}` : sql``;
    const rows = await db.execute<SampleRow>(sql`
      select s.id, s.length, s.pipeline_id, s.team_id, s.created_at, s.created_at::text as created_at_text,
             s.user_id, s.group_id, s.metadata${input.withGeneration ? sql`, s.generation` : sql``}
      from ${src.from}
      ${condition}
      order by ${src.ts}, ${src.id}
      limit ${size} offset ${offset}`);
    offset = 0;
    const now = Date.now();
    for (const row of rows)
      yield input.withGeneration
        ? { ...toSampleDto(row, now), generation: row.generation ?? null }
        : toSampleDto(row, now);
    if (rows.length < size) return;
    const last = rows[rows.length - 1]!;
    after = { createdAt: last.created_at_text, id: last.id };
    remaining -= rows.length;
  }
}

/**
 * Where a listing of the pipeline stops: the start of the oldest transaction still inserting
 * samples into it (its samples, and any later one's, have created_at past it), else now. A sample
 * commits after it got its created_at: an import chunk or an add-batch of 1,000 takes a while,
 * and a single add made meanwhile commits first. Listed up to now, that add moved a client's
 * cursor past the chunk's samples, which then never appeared on any page. Left out now, they
 * come on the next page once committed. (In a statement of its own, before the rows are read: a
 * writer that commits in between either held its lock when pg_locks was read, or took it after
 * this statement began, so its samples are past statement_timestamp().)
 */
async function listingHorizon(db: DbOrTx, pipelineId: string): Promise<string> {
  const [row] = await db.execute<{ horizon: string }>(sql`
    select least(
      statement_timestamp(),
      (select min(a.xact_start) from pg_locks l join pg_stat_activity a on a.pid = l.pid
        where l.locktype = 'advisory' and l.granted and l.pid <> pg_backend_pid()
          and l.classid = ${SAMPLE_WRITERS}::oid and l.objid = (hashtext(${pipelineId})::bigint & 4294967295)::oid
          and l.objsubid = 2)
    )::text as horizon`);
  return row!.horizon;
}

/** A position in selection order: the sample a cursor names. */
export type CursorKey = { createdAt: string; id: string };

/**
 * The position of `after` (a sample id) in the pipeline; a 400 naming `after` when the pipeline
 * has no such sample (never had, another pipeline's or team's, or deleted since).
 */
export async function resolveCursor(db: DbOrTx, pipelineId: string, after: string | undefined) {
  if (after === undefined) return undefined;
  const [row] = await db.execute<{ created_at: string }>(
    sql`select created_at::text as created_at from samples where id = ${after} and pipeline_id = ${pipelineId}`,
  );
  if (!row) throw invalidRequest(`Invalid 'after': this pipeline has no sample '${after}'.`, "after");
  return { createdAt: row.created_at, id: after } satisfies CursorKey;
}

/** Number of samples the same selection would list (after, sample, offset and limit applied). */
export async function countSelection(db: DbOrTx, input: { pipelineId: string; selection: Selection }): Promise<number> {
  const cursor = await resolveCursor(db, input.pipelineId, input.selection.after);
  if (cursor && input.selection.sample) {
    // The cursor applies within the sampled subset: counted from it, not from the filtered set.
    const src = selectionRows(input.pipelineId, input.selection, { withSamples: false });
    src.where.push(afterSample(src, cursor));
    const [row] = await db.execute<{ n: number }>(sql`select count(*)::int as n from ${src.from} ${whereOf(src)}`);
    return listedCount({ limit: input.selection.limit, offset: input.selection.offset }, row?.n ?? 0);
  }
  return listedCount(input.selection, await filteredCount(db, input.pipelineId, input.selection, undefined, cursor));
}

/**
 * The messages of one sample, for its signed URL (no team check: the signature is the
 * credential). A deleted sample, or one of a deleted pipeline, has none.
 */
export async function getSampleMessages(db: DbOrTx, sampleId: string) {
  const [row] = await db
    .select({ messages: samples.messages })
    .from(samples)
    .innerJoin(pipelines, and(eq(pipelines.id, samples.pipelineId), isNull(pipelines.deletedAt)))
    .where(eq(samples.id, sampleId));
  return row?.messages;
}

/**
 * PATCH /v1/samples/:id: merges `metadata` into the sample's labels (a key given replaces its
 * value, the others stay), with the limits of `add` on the result (at most LIMITS.metadataKeys
 * keys). The labels table follows in the same transaction, so selections filter on the new
 * labels at once. Another team's sample, an unknown or deleted one (or one of a deleted
 * pipeline) is a 404 naming `id`. Returns the sample as listed.
 */
export async function mergeSampleMetadata(
  db: DbOrTx,
  input: { teamId: string; id: string; metadata: Record<string, string> },
): Promise<SampleDto> {
  return db.transaction(async (tx) => {
    const [current] = await tx.execute<{ metadata: Record<string, string> | null }>(sql`
      select s.metadata from samples s
      join pipelines p on p.id = s.pipeline_id and p.deleted_at is null
      where s.id = ${input.id} and s.team_id = ${input.teamId}
      for update of s`);
    if (!current) throw notFound(`No sample with id '${input.id}'.`, "id");
    const merged = { ...(current.metadata ?? {}), ...input.metadata };
    if (Object.keys(merged).length > LIMITS.metadataKeys)
      throw invalidRequest(
        `Invalid 'metadata': the sample would have ${Object.keys(merged).length} keys, at most ${LIMITS.metadataKeys} are allowed.`,
        "metadata",
      );
    const keys = Object.keys(input.metadata);
    const patch = JSON.stringify(input.metadata);
    const mergedJson = Object.keys(merged).length > 0 ? JSON.stringify(merged) : null;
    // The given keys' labels go (by the key-order index: pipeline, key, created_at, sample) and
    // come back with their new values; then the row. Separate statements: within one, the insert
    // could meet the very labels the delete removes.
    const s = sql`(select id, pipeline_id, created_at from samples where id = ${input.id})`;
    await tx.execute(sql`
      delete from sample_labels l using ${s} s
      where l.pipeline_id = s.pipeline_id and l.key = any(${textArray(keys)})
        and l.created_at = s.created_at and l.sample_id = s.id`);
    await tx.execute(sql`
      insert into sample_labels (pipeline_id, key, value, created_at, sample_id)
      select s.pipeline_id, kv.key, kv.value, s.created_at, s.id from ${s} s, jsonb_each_text(${patch}::jsonb) kv`);
    const [row] = await tx.execute<SampleRow>(sql`
      update samples set metadata = ${mergedJson}::jsonb, relabelled = true where id = ${input.id}
      returning id, length, pipeline_id, team_id, created_at, created_at::text as created_at_text,
                user_id, group_id, metadata`);
    return toSampleDto(row!);
  });
}
