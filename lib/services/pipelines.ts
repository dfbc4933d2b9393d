import { and, desc, eq, sql } from "drizzle-orm";
import type { DbOrTx } from "../db/client";
import { pipelines, samples, type Pipeline } from "../db/schema";
import { notFound } from "../errors";
import { newId } from "../ids";
import type { PipelineDto } from "../contracts/pipelines";

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
};

export function toPipelineDto(p: Pick<Pipeline, "id" | "teamId" | "name" | "createdAt" | "updatedAt">): PipelineDto {
  return {
    id: p.id,
    teamId: p.teamId,
    name: p.name,
    createdAt: p.createdAt.toISOString(),
    updatedAt: p.updatedAt.toISOString(),
  };
}

export async function createPipeline(db: DbOrTx, input: { teamId: string; name: string }): Promise<Pipeline> {
  const [row] = await db
    .insert(pipelines)
    .values({ id: newId("pipeline"), teamId: input.teamId, name: input.name })
    .returning();
  return row!;
}

/** A team's pipelines, newest first. */
export async function listPipelines(db: DbOrTx, teamId: string): Promise<Pipeline[]> {
  return db
    .select(columns)
    .from(pipelines)
    .where(eq(pipelines.teamId, teamId))
    .orderBy(desc(pipelines.createdAt), desc(pipelines.id));
}

/** The pipeline when it belongs to `teamId`; 404 otherwise (another team's id looks unknown). */
export async function getPipeline(db: DbOrTx, input: { teamId: string; id: string }): Promise<Pipeline> {
  const [row] = await db
    .select(columns)
    .from(pipelines)
    .where(and(eq(pipelines.id, input.id), eq(pipelines.teamId, input.teamId)));
  if (!row) throw pipelineNotFound(input.id);
  return row;
}

export function pipelineNotFound(id: string) {
  return notFound(`No pipeline with id '${id}'.`, "id");
}
