import { and, desc, eq, isNull, sql } from "drizzle-orm";
import type { DbOrTx } from "../db/client";
import { pipelines, samples, type Pipeline } from "../db/schema";
import { notFound } from "../errors";
import { newId } from "../ids";
import type { PipelineDto, UpdatePipelineInput } from "../contracts/pipelines";

/**
 * updatedAt is the later of the pipeline row's own update and its newest sample. It is
 * derived (one backward step on samples_pipeline_order_idx) rather than written on every
 * add, which would serialise concurrent adds on the pipeline row.
 */
// Written with explicit table names: drizzle renders columns unqualified in a one-table
// select, which inside the subquery would resolve to the samples table.
const updatedAt = sql<Date>`greatest(pipelines.updated_at, (
  select max(s.created_at) from ${samples} s where s.pipeline_id = pipelines.id
))`.mapWith(pipelines.updatedAt);

const columns = {
  id: pipelines.id,
  teamId: pipelines.teamId,
  name: pipelines.name,
  createdAt: pipelines.createdAt,
  updatedAt,
  retentionDays: pipelines.retentionDays,
};

type PipelineFields = Pick<Pipeline, "id" | "teamId" | "name" | "createdAt" | "updatedAt" | "retentionDays">;

export function toPipelineDto(p: PipelineFields): PipelineDto {
  return {
    id: p.id,
    teamId: p.teamId,
    name: p.name,
    createdAt: p.createdAt.toISOString(),
    updatedAt: p.updatedAt.toISOString(),
    retentionDays: p.retentionDays,
  };
}

export async function createPipeline(db: DbOrTx, input: { teamId: string; name: string }): Promise<Pipeline> {
  const [row] = await db
    .insert(pipelines)
    .values({ id: newId("pipeline"), teamId: input.teamId, name: input.name })
    .returning();
  return row!;
}

/** A team's pipelines (deleted ones are gone), newest first. */
export async function listPipelines(db: DbOrTx, teamId: string): Promise<PipelineFields[]> {
  return db
    .select(columns)
    .from(pipelines)
    .where(and(eq(pipelines.teamId, teamId), isNull(pipelines.deletedAt)))
    .orderBy(desc(pipelines.createdAt), desc(pipelines.id));
}

/** The pipeline when it belongs to `teamId`; 404 otherwise (another team's id, or a deleted one, looks unknown). */
export async function getPipeline(db: DbOrTx, input: { teamId: string; id: string }): Promise<PipelineFields> {
  const [row] = await db
    .select(columns)
    .from(pipelines)
    .where(and(eq(pipelines.id, input.id), eq(pipelines.teamId, input.teamId), isNull(pipelines.deletedAt)));
  if (!row) throw pipelineNotFound(input.id);
  return row;
}

/** PATCH: the name and the retention period (null: keep samples forever); absent fields stay. */
export async function updatePipeline(
  db: DbOrTx,
  input: { teamId: string; id: string; changes: UpdatePipelineInput },
): Promise<PipelineFields> {
  const { name, retentionDays } = input.changes;
  if (name !== undefined || retentionDays !== undefined) {
    const updated = await db
      .update(pipelines)
      .set({
        ...(name !== undefined ? { name } : {}),
        ...(retentionDays !== undefined ? { retentionDays } : {}),
        updatedAt: sql`now()`,
      })
      .where(and(eq(pipelines.id, input.id), eq(pipelines.teamId, input.teamId), isNull(pipelines.deletedAt)))
      .returning({ id: pipelines.id });
    if (updated.length === 0) throw pipelineNotFound(input.id);
  }
  return getPipeline(db, input);
}

/**
 * In a transaction: the team's pipeline must be live, and stays so until the transaction ends
 * (FOR SHARE waits for, and holds off, deletePipeline's update): a row made for it meanwhile is
 * either refused here or dealt with by the deletion (FAILED datasets and imports). `for update`
 * also waits for the adds in flight (they hold it `for key share`). 404 otherwise.
 */
export async function holdLivePipeline(
  tx: DbOrTx,
  input: { teamId: string; id: string },
  lock: "share" | "update" = "share",
): Promise<void> {
  const found = await tx.execute(sql`
    select id from pipelines where id = ${input.id} and team_id = ${input.teamId} and deleted_at is null
    for ${sql.raw(lock)}`);
  if (found.length === 0) throw pipelineNotFound(input.id);
}

export function pipelineNotFound(id: string) {
  return notFound(`No pipeline with id '${id}'.`, "id");
}
