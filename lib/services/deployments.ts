import { and, asc, eq, sql } from "drizzle-orm";
import { rawSql } from "../db/raw";
import type { DbOrTx } from "../db/client";
import { deployments, type Deployment } from "../db/schema";
import { DeploymentModel, DeploymentName, type DeploymentDto } from "../contracts/deployments";
import { env } from "../env";
import { conflict, fromZodError, notFound, unauthorized } from "../errors";
import { newId } from "../ids";
import type { KeyPrincipal } from "./api-keys";

/** Every model some deployment points at: what the workers must be able to serve. */
export async function listDeployedModels(db: DbOrTx): Promise<string[]> {
  const rows = await db
    .selectDistinct({ model: deployments.model })
    .from(deployments)
    .orderBy(sql`1`);
  return rows.map((r) => r.model);
}

/** `{PUBLIC_URL}/deployments/{team-slug}/{name}`: no version segment. */
export function deploymentUrl(teamSlug: string, name: string): string {
  return `${env().PUBLIC_URL}/deployments/${teamSlug}/${name}`;
}

export function toDeploymentDto(d: Deployment, teamSlug: string): DeploymentDto {
  return {
    id: d.id,
    teamId: d.teamId,
    name: d.name,
    model: d.model,
    url: deploymentUrl(teamSlug, d.name),
    createdAt: d.createdAt.toISOString(),
  };
}

export async function createDeployment(
  db: DbOrTx,
  input: { teamId: string; name: string; model: string },
): Promise<Deployment> {
  const name = DeploymentName.safeParse(input.name);
  if (!name.success) throw fromZodError(name.error, "name");
  const model = DeploymentModel.safeParse(input.model);
  if (!model.success) throw fromZodError(model.error, "model");
  const [row] = await db
    .insert(deployments)
    .values({ id: newId("deployment"), teamId: input.teamId, name: name.data, model: model.data })
    .onConflictDoNothing({ target: [deployments.teamId, deployments.name] })
    .returning();
  if (!row) throw conflict(`A deployment named '${name.data}' already exists in this team.`, "name");
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
  return row;
}

/** A deployment by its URL's team slug and name (no authorization: see `authorizeDeployment`). */
export async function findDeploymentByPath(
  db: DbOrTx,
  input: { teamSlug: string; name: string },
): Promise<Deployment | null> {
  // On the path to every first token: a prepared statement, not a drizzle-built query.
  const [row] = await rawSql(db)<{ id: string; team_id: string; name: string; model: string; created_at: string }[]>`
    select d.id, d.team_id, d.name, d.model, d.created_at
    from deployments d join teams t on t.id = d.team_id
    where t.slug = ${input.teamSlug} and d.name = ${input.name}`;
  if (!row) return null;
  // (drizzle's postgres.js client leaves timestamps as strings.)
  return { id: row.id, teamId: row.team_id, name: row.name, model: row.model, createdAt: new Date(row.created_at) };
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
