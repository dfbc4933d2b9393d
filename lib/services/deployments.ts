import { and, asc, eq } from "drizzle-orm";
import type postgres from "postgres";
import { changeFeedOf } from "../db/change-feed";
import { rawSql } from "../db/raw";
import type { DbOrTx } from "../db/client";
import { deployments, type Deployment } from "../db/schema";
import { DeploymentModel, DeploymentName, type DeploymentDto, type DeploymentState } from "../contracts/deployments";
import { DtypeChoiceSchema, type DtypeChoice } from "../contracts/models";
import { env } from "../env";
import { conflict, fromZodError, notFound, unauthorized } from "../errors";
import { newId } from "../ids";
import type { KeyPrincipal } from "./api-keys";
import { deploymentStates } from "./deployment-state";

/** Every (model, dtype) some deployment serves: what the workers load. */
export async function listDeployedModels(db: DbOrTx): Promise<{ model: string; dtype: DtypeChoice }[]> {
  return db
    .selectDistinct({ model: deployments.model, dtype: deployments.dtype })
    .from(deployments)
    .orderBy(deployments.model, deployments.dtype);
}

/** `{PUBLIC_URL}/deployments/{team-slug}/{name}`: no version segment. */
export function deploymentUrl(teamSlug: string, name: string): string {
  return `${env().PUBLIC_URL}/deployments/${teamSlug}/${name}`;
}

export function toDeploymentDto(d: Deployment, teamSlug: string, status: DeploymentState): DeploymentDto {
  return {
    id: d.id,
    teamId: d.teamId,
    name: d.name,
    model: d.model,
    dtype: d.dtype,
    url: deploymentUrl(teamSlug, d.name),
    createdAt: d.createdAt.toISOString(),
    status,
  };
}

/** A team's deployments with their states. */
export async function listDeploymentDtos(db: DbOrTx, team: { id: string; slug: string }): Promise<DeploymentDto[]> {
  const rows = await listDeployments(db, team.id);
  const states = await deploymentStates(db, rows);
  return rows.map((d, i) => toDeploymentDto(d, team.slug, states[i]!));
}

export async function createDeployment(
  db: DbOrTx,
  input: { teamId: string; name: string; model: string; dtype?: string },
): Promise<Deployment> {
  const dtype = DtypeChoiceSchema.safeParse(input.dtype ?? "auto");
  if (!dtype.success) throw fromZodError(dtype.error, "dtype");
  const name = DeploymentName.safeParse(input.name);
  if (!name.success) throw fromZodError(name.error, "name");
  const model = DeploymentModel.safeParse(input.model);
  if (!model.success) throw fromZodError(model.error, "model");
  const [row] = await db
    .insert(deployments)
    .values({ id: newId("deployment"), teamId: input.teamId, name: name.data, model: model.data, dtype: dtype.data })
    .onConflictDoNothing({ target: [deployments.teamId, deployments.name] })
    .returning();
  if (!row) throw conflict(`A deployment named '${name.data}' already exists in this team.`, "name");
  changeFeedOf(rawSql(db))?.invalidate("deployments"); // this process at once; others on NOTIFY
  return row;
}

export async function listDeployments(db: DbOrTx, teamId: string): Promise<Deployment[]> {
  return db.select().from(deployments).where(eq(deployments.teamId, teamId)).orderBy(asc(deployments.name));
}

/** `param` names the request field a 404 points at (`model` for chat completions), if any. */
export async function getDeploymentByName(
  db: DbOrTx,
  input: { teamId: string; name: string },
  param?: string,
): Promise<Deployment> {
  const [row] = await db
    .select()
    .from(deployments)
    .where(and(eq(deployments.teamId, input.teamId), eq(deployments.name, input.name)));
  if (!row) throw notFound(`No deployment named '${input.name}'.`, param);
  return row;
}

/** Deletes a deployment; model keys scoped to it go with it (the foreign key cascades). */
export async function deleteDeployment(db: DbOrTx, input: { teamId: string; name: string }): Promise<Deployment> {
  const [row] = await db
    .delete(deployments)
    .where(and(eq(deployments.teamId, input.teamId), eq(deployments.name, input.name)))
    .returning();
  if (!row) throw notFound(`No deployment named '${input.name}'.`, "name");
  changeFeedOf(rawSql(db))?.invalidate("deployments");
  return row;
}

/** A deployment by its URL's team slug and name (no authorization: see `authorizeDeployment`). */
export async function findDeploymentByPath(
  db: DbOrTx,
  input: { teamSlug: string; name: string },
): Promise<Deployment | null> {
  // Cached per process when the pool has a change feed: deployments and teams announce changes.
  const sql = rawSql(db);
  const feed = changeFeedOf(sql);
  if (!feed) return loadDeploymentByPath(sql, input);
  return feed
    .cache<string, Deployment | null>("deployments", DEPLOYMENT_CACHE)
    .get(`${input.teamSlug}/${input.name}`, () => loadDeploymentByPath(sql, input));
}

const DEPLOYMENT_CACHE = { tables: ["deployments", "teams"], ttlMs: 5 * 60_000, maxEntries: 10_000 };

async function loadDeploymentByPath(
  sql: postgres.Sql,
  input: { teamSlug: string; name: string },
): Promise<Deployment | null> {
  // On the path to every first token: a prepared statement, not a drizzle-built query.
  const [row] = await sql<
    { id: string; team_id: string; name: string; model: string; dtype: Deployment["dtype"]; created_at: string }[]
  >`
    select d.id, d.team_id, d.name, d.model, d.dtype, d.created_at
    from deployments d join teams t on t.id = d.team_id
    where t.slug = ${input.teamSlug} and d.name = ${input.name}`;
  if (!row) return null;
  // (drizzle's postgres.js client leaves timestamps as strings.)
  return {
    id: row.id,
    teamId: row.team_id,
    name: row.name,
    model: row.model,
    dtype: row.dtype,
    createdAt: new Date(row.created_at),
  };
}

/**
 * Whether `principal` may call the deployment at /deployments/{teamSlug}/{name} (`found` is that
 * path's deployment or null). A key of another team, or one scoped to another deployment, is 401
 * (the spec's status for this endpoint); an unknown name in the key's own team is 404.
 */
export function authorizeDeployment(
  principal: KeyPrincipal,
  input: { teamSlug: string; name: string },
  found: Deployment | null,
): Deployment {
  if (principal.team.slug !== input.teamSlug) throw unauthorized("This model key belongs to another team.");
  if (!found || found.teamId !== principal.team.id) throw notFound(`No deployment named '${input.name}'.`);
  if (principal.key.deploymentId && principal.key.deploymentId !== found.id)
    throw unauthorized("This model key is scoped to another deployment.");
  return found;
}
