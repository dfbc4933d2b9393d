import type postgres from "postgres";
import type { GenerationFacts } from "../contracts/capture";
import type { AddSampleInput } from "../contracts/pipelines";

/** A sample to insert: its id, its pipeline, and its row as JSON (rows travel as one JSON array). */
export type NewSample = { id: string; pipelineId: string; json: string };

/**
 * The row of one add body, as the insert below reads it. `{}` metadata is stored as null.
 * `generation`: a captured completion's facts (lib/services/capture.ts); `importId`: the import
 * that stores it.
 */
export function newSampleRow(
  id: string,
  pipelineId: string,
  teamId: string,
  sample: AddSampleInput,
  generation?: GenerationFacts,
  importId?: string,
): NewSample {
  const { messages, userId, groupId, metadata, tools } = sample;
  const json = JSON.stringify({
    id,
    pipeline_id: pipelineId,
    team_id: teamId,
    messages,
    length: messages.length,
    user_id: userId ?? null,
    group_id: groupId ?? null,
    metadata: metadata && Object.keys(metadata).length > 0 ? metadata : null,
    generation: generation ?? null,
    import_id: importId ?? null,
    tools: tools ?? null,
  });
  return { id, pipelineId, json };
}

/**
 * Each statement that inserts samples holds, until it commits, a shared advisory lock per
 * pipeline (SAMPLE_WRITERS, hashtext(pipeline id)), taken with the row lock, before created_at
 * is: a listing finds the writers still in flight in pg_locks, and lists only samples older than
 * the oldest one's start, so that a sample committed late never lands behind a page already read
 * (samples.ts, listingHorizon).
 */
export const SAMPLE_WRITERS = 0x6c6d70; // "lmp"

/**
 * Inserts rows (one statement: the rows as one JSON array) with their metadata labels; returns the
 * ids it inserted. The pipeline is selected by id *and* team, and must not be deleted, so a row
 * aimed at an unknown, foreign or deleted pipeline inserts nothing. `for key share` locks the
 * pipeline rows *before* created_at (clock_timestamp()) is taken: a dataset being created (which
 * locks the row `for update`, see createDataset) then either sees these samples committed or gets
 * a bound older than their created_at, never one in between. Rows keep the array's order, so
 * their created_at follows it. `skipExisting`: an id that exists already is skipped (an import's
 * ids are derived from its lines: a line stored before is never stored twice).
 */
export async function insertSampleRows(
  sql: postgres.Sql | postgres.TransactionSql,
  rows: NewSample[],
  options: { skipExisting?: boolean } = {},
): Promise<Set<string>> {
  const inserted = await sql<{ id: string }[]>`
    with ${sampleInsertCtes(sql, rows, options)}
    select id from s`;
  return new Set(inserted.map((r) => r.id));
}

/**
 * The CTEs of insertSampleRows, for statements that do more in the same round trip: `r` (the
 * rows), `p` (their live pipelines, locked), `s` (the samples inserted: id, pipeline_id,
 * created_at, metadata) and `l` (their labels). `gate`: a condition that must hold for anything
 * to be inserted (it may name other CTEs of the statement, e.g. a lease checked before these).
 */
export function sampleInsertCtes(
  sql: postgres.Sql | postgres.TransactionSql,
  rows: NewSample[],
  options: { skipExisting?: boolean; gate?: postgres.PendingQuery<postgres.Row[]> } = {},
) {
  const payload = `[${rows.map((r) => r.json).join(",")}]`;
  const conflict = options.skipExisting ? sql`on conflict (id) do nothing` : sql``;
  const gate = options.gate ? sql`and ${options.gate}` : sql``;
  return sql`
    r as (
      select * from rows from (jsonb_to_recordset(${payload}::jsonb) as (
        id text, pipeline_id text, team_id text, messages jsonb, length int,
        user_id text, group_id text, metadata jsonb, generation jsonb, import_id text, tools jsonb)
      ) with ordinality as r(id, pipeline_id, team_id, messages, length, user_id, group_id, metadata, generation, import_id, tools, ord)
    ), p as (
      select id, team_id, pg_advisory_xact_lock_shared(${SAMPLE_WRITERS}::int, hashtext(id)) as writing from pipelines
      -- The writer's own team's pipelines only: another team's id locks nothing (its dataset
      -- freezes would wait, and the wait would tell that the id exists).
      where (id, team_id) in (select pipeline_id, team_id from r) and deleted_at is null ${gate}
      for key share
    ), s as (
      insert into samples (id, pipeline_id, team_id, messages, length, user_id, group_id, metadata, generation, import_id, tools)
      select r.id, p.id, p.team_id, r.messages, r.length, r.user_id, r.group_id, r.metadata, r.generation, r.import_id, r.tools
      from r join p on p.id = r.pipeline_id and p.team_id = r.team_id
      order by r.ord
      ${conflict}
      returning id, pipeline_id, created_at, metadata
    ), l as (
      insert into sample_labels (pipeline_id, key, value, created_at, sample_id)
      select s.pipeline_id, kv.key, kv.value, s.created_at, s.id
      from s, jsonb_each_text(coalesce(s.metadata, '{}'::jsonb)) kv
    )`;
}
