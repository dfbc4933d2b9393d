import { and, asc, eq, isNull, sql } from "drizzle-orm";
import type postgres from "postgres";
import { changeFeedOf } from "../db/change-feed";
import { rawSql } from "../db/raw";
import type { DbOrTx } from "../db/client";
import { deployments, teams, type Deployment } from "../db/schema";
import { DeploymentModel, DeploymentName, type DeploymentDto, type DeploymentState } from "../contracts/deployments";
import { DtypeChoiceSchema, type DtypeChoice } from "../contracts/models";
import { shownUrl, UpstreamInput, type UpstreamDto } from "../contracts/upstream";
import { seal } from "../secret-box";
import { env } from "../env";
import { ApiError, conflict, fromZodError, notFound, unauthorized } from "../errors";
import { newId } from "../ids";
import type { KeyPrincipal } from "./api-keys";
import { deploymentStates } from "./deployment-state";

/**
 * Every (model, dtype, team) of the local deployments: what the workers load (upstream ones are
 * not theirs), with the team each serves it for (WORKER_SERVES may place teams).
 */
export async function listDeployedModels(
  db: DbOrTx,
): Promise<{ model: string; dtype: DtypeChoice; teamId: string; teamSlug: string }[]> {
  return db
    .selectDistinct({ model: deployments.model, dtype: deployments.dtype, teamId: teams.id, teamSlug: teams.slug })
    .from(deployments)
    .innerJoin(teams, eq(teams.id, deployments.teamId))
    .where(isNull(deployments.upstreamKind))
    .orderBy(deployments.model, deployments.dtype, teams.id);
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
    ...(d.upstreamKind ? { upstream: upstreamDto(d) } : {}),
  };
}

/** What is shown of an upstream deployment: never its key, only whether it has one. */
export function upstreamDto(
  d: Pick<Deployment, "upstreamKind" | "upstreamUrls" | "upstreamModel" | "upstreamKey">,
): UpstreamDto {
  return {
    kind: d.upstreamKind!,
    urls: (d.upstreamUrls ?? []).map(shownUrl),
    model: d.upstreamModel ?? "",
    hasKey: !!d.upstreamKey,
  };
}

/** A team's deployments with their states. */
export async function listDeploymentDtos(db: DbOrTx, team: { id: string; slug: string }): Promise<DeploymentDto[]> {
  const rows = await listDeployments(db, team.id);
  const states = await deploymentStates(db, rows);
  return rows.map((d, i) => toDeploymentDto(d, team.slug, states[i]!));
}

/**
 * Deployments of a model the workers load that a team's owner may create from the dashboard (its
 * `modelDeployments` limit): every worker downloads and loads each one (unless WORKER_SERVES
 * places it), so one team deploying dozens of large hub models would fill every worker's disk and
 * memory, and the other teams' models would no longer fit. Upstream deployments do not count (the
 * workers hold nothing of them); the operator's CLI is not limited. 403 naming `model`; concurrent
 * creations may overshoot by a few.
 */
export async function assertModelDeploymentQuota(db: DbOrTx, teamId: string, limit: number): Promise<void> {
  const [row] = await db.execute<{ n: number }>(
    sql`select count(*)::int as n from deployments where team_id = ${teamId} and upstream_urls is null`,
  );
  const n = row?.n ?? 0;
  if (n >= limit)
    throw new ApiError(
      403,
      "forbidden",
      `This team already has ${n} model deployments (limit ${limit}): delete one first, or ask the operator to raise ` +
        "the limit (npm run cli -- team:limits --model-deployments N).",
      "model",
    );
}

/**
 * A local deployment (`model`: what the workers load) or, with `upstream`, one served by
 * OpenAI-compatible servers (`model` defaults to the upstream's model name; its key is sealed).
 */
export async function createDeployment(
  db: DbOrTx,
  input: {
    teamId: string;
    name: string;
    model?: string;
    dtype?: string;
    upstream?: UpstreamInput;
    /** Check the upstream hosts at every connection: a team's owner chose them, not the operator. */
    checkUpstreamHosts?: boolean;
  },
): Promise<Deployment> {
  const dtype = DtypeChoiceSchema.safeParse(input.dtype ?? "auto");
  if (!dtype.success) throw fromZodError(dtype.error, "dtype");
  const name = DeploymentName.safeParse(input.name);
  if (!name.success) throw fromZodError(name.error, "name");
  const upstream = input.upstream === undefined ? undefined : UpstreamInput.safeParse(input.upstream);
  if (upstream && !upstream.success) throw fromZodError(upstream.error, "upstream");
  const model = DeploymentModel.safeParse(input.model ?? upstream?.data?.model);
  if (!model.success) throw fromZodError(model.error, "model");
  const id = newId("deployment");
  const up = upstream?.data;
  const [row] = await db
    .insert(deployments)
    .values({
      id,
      teamId: input.teamId,
      name: name.data,
      model: model.data,
      dtype: dtype.data,
      ...(up
        ? {
            upstreamKind: up.kind,
            upstreamUrls: up.urls,
            upstreamModel: up.model,
            upstreamKey: up.key ? seal(up.key, id) : null,
            upstreamHostsChecked: input.checkUpstreamHosts ?? false,
          }
        : {}),
    })
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
    {
      id: string;
      team_id: string;
      name: string;
      model: string;
      dtype: Deployment["dtype"];
      created_at: string;
      upstream_kind: Deployment["upstreamKind"];
      upstream_urls: string[] | null;
      upstream_model: string | null;
      upstream_key: string | null;
      upstream_hosts_checked: boolean;
    }[]
  >`
    select d.id, d.team_id, d.name, d.model, d.dtype, d.created_at,
      d.upstream_kind, d.upstream_urls, d.upstream_model, d.upstream_key, d.upstream_hosts_checked
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
    upstreamKind: row.upstream_kind,
    upstreamUrls: row.upstream_urls,
    upstreamModel: row.upstream_model,
    upstreamKey: row.upstream_key,
    upstreamHostsChecked: row.upstream_hosts_checked,
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
