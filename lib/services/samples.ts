import { and, asc, eq, sql, type SQL } from "drizzle-orm";
import type { DbOrTx } from "../db/client";
import { pipelines, samples, type Sample } from "../db/schema";
import type { AddSampleInput, SampleDto, Selection } from "../contracts/pipelines";
import { newId } from "../ids";
import { signedUrl } from "../signing";
import { pipelineNotFound } from "./pipelines";

/**
 * Adds a sample. One statement: the insert selects the pipeline by id *and* team, so an
 * unknown or foreign pipeline inserts nothing and is reported as not found.
 */
export async function addSample(
  db: DbOrTx,
  input: { teamId: string; pipelineId: string; sample: AddSampleInput },
): Promise<{ id: string }> {
  const id = newId("sample");
  const { messages, userId, groupId, metadata } = input.sample;
  const metadataValue = metadata && Object.keys(metadata).length > 0 ? JSON.stringify(metadata) : null;
  const rows = await db.execute<{ id: string }>(sql`
    insert into ${samples} (id, pipeline_id, team_id, messages, length, user_id, group_id, metadata)
    select ${id}, p.id, p.team_id, ${JSON.stringify(messages)}::jsonb, ${messages.length},
           ${userId ?? null}, ${groupId ?? null}, ${metadataValue}::jsonb
    from ${pipelines} p
    where p.id = ${input.pipelineId} and p.team_id = ${input.teamId}
    returning id`);
  if (rows.length === 0) throw pipelineNotFound(input.pipelineId);
  return { id };
}

/** The WHERE clause of a selection (pipeline ownership is checked by the caller). */
export function selectionWhere(pipelineId: string, s: Selection): SQL {
  const conditions: SQL[] = [eq(samples.pipelineId, pipelineId)];
  if (s.userId !== undefined) conditions.push(eq(samples.userId, s.userId));
  if (s.groupId !== undefined) conditions.push(eq(samples.groupId, s.groupId));
  if (s.metadata && Object.keys(s.metadata).length > 0) {
    // `@>` is served by the GIN index samples_metadata_idx.
    conditions.push(sql`${samples.metadata} @> ${JSON.stringify(s.metadata)}::jsonb`);
  }
  return and(...conditions)!;
}

/** Every selection lists in (created_at, id) order: stable, so limit/offset pages neither repeat nor skip. */
export const selectionOrder = [asc(samples.createdAt), asc(samples.id)];

const listColumns = {
  id: samples.id,
  length: samples.length,
  pipelineId: samples.pipelineId,
  teamId: samples.teamId,
  createdAt: samples.createdAt,
  userId: samples.userId,
  groupId: samples.groupId,
  metadata: samples.metadata,
};
type SampleListRow = Pick<Sample, keyof typeof listColumns>;

export function sampleContentPath(sampleId: string): string {
  return `/v1/samples/${sampleId}/content`;
}

export function toSampleDto(row: SampleListRow, now = Date.now()): SampleDto {
  return {
    id: row.id,
    length: row.length,
    pipelineId: row.pipelineId,
    teamId: row.teamId,
    createdAt: new Date(row.createdAt).toISOString(),
    userId: row.userId,
    groupId: row.groupId,
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
  input: { pipelineId: string; selection: Selection; batch?: number },
): AsyncGenerator<SampleDto> {
  const batch = input.batch ?? 500;
  const where = selectionWhere(input.pipelineId, input.selection);
  let remaining = input.selection.limit ?? Number.POSITIVE_INFINITY;
  // created_at travels as text: a JS Date would drop the microseconds and break the keyset.
  let after: { createdAt: string; id: string } | undefined;
  while (remaining > 0) {
    const size = Math.min(batch, remaining);
    const rows = await db
      .select({ ...listColumns, createdAtText: sql<string>`${samples.createdAt}::text` })
      .from(samples)
      .where(
        after
          ? and(where, sql`(${samples.createdAt}, ${samples.id}) > (${after.createdAt}::timestamptz, ${after.id})`)
          : where,
      )
      .orderBy(...selectionOrder)
      .limit(size)
      .offset(after ? 0 : (input.selection.offset ?? 0));
    const now = Date.now();
    for (const row of rows) yield toSampleDto(row, now);
    if (rows.length < size) return;
    const last = rows[rows.length - 1]!;
    after = { createdAt: last.createdAtText, id: last.id };
    remaining -= rows.length;
  }
}

/** Number of samples the same selection would list (limit and offset applied). */
export async function countSelection(db: DbOrTx, input: { pipelineId: string; selection: Selection }): Promise<number> {
  const { limit, offset } = input.selection;
  const [row] = await db
    .select({ count: sql<number>`count(*)::int` })
    .from(samples)
    .where(selectionWhere(input.pipelineId, input.selection));
  const total = Math.max(0, (row?.count ?? 0) - (offset ?? 0));
  return limit === undefined ? total : Math.min(total, limit);
}

/** The messages of one sample, for its signed URL (no team check: the signature is the credential). */
export async function getSampleMessages(db: DbOrTx, sampleId: string) {
  const [row] = await db.select({ messages: samples.messages }).from(samples).where(eq(samples.id, sampleId));
  return row?.messages;
}
