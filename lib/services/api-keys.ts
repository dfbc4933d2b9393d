import { and, desc, eq, inArray, isNull, sql } from "drizzle-orm";
import type { DbOrTx } from "../db/client";
import { apiKeys, deployments, pipelines, users, type ApiKey, type Team } from "../db/schema";
import { notFound, unauthorized } from "../errors";
import { displayPrefix, generateKeySecret, hashKeySecret, secretKind, type KeyKind } from "../auth/key-secret";
import { newId } from "../ids";
import type postgres from "postgres";
import { createBatcher, perClient } from "../db/batch";
import type { TeamLimitOverrides } from "../contracts/limits";
import { changeFeedOf } from "../db/change-feed";
import { rawSql } from "../db/raw";
import { logger } from "../observe/log";

export type CreatedKey = { key: ApiKey; secret: string };

/** Creates a key; the secret is returned here once and never stored. */
export async function createApiKey(
  db: DbOrTx,
  input: {
    teamId: string;
    kind: KeyKind;
    name?: string | null;
    deploymentId?: string | null;
    /** Model keys: the pipelines it may capture into (null or absent: any of the team's; []: none). */
    capturePipelines?: string[] | null;
    createdBy?: string;
  },
): Promise<CreatedKey> {
  if (input.kind === "api" && input.deploymentId) {
    throw new Error("Only model keys can be scoped to a deployment.");
  }
  if (input.kind === "api" && input.capturePipelines) {
    throw new Error("Only model keys have a capture scope: an API key may write to any pipeline of its team.");
  }
  if (input.capturePipelines?.length) await checkCapturePipelines(db, input.teamId, input.capturePipelines);
  const secret = generateKeySecret(input.kind);
  const [key] = await db
    .insert(apiKeys)
    .values({
      id: newId("key"),
      teamId: input.teamId,
      kind: input.kind,
      name: input.name?.trim() || null,
      deploymentId: input.deploymentId ?? null,
      capturePipelines: input.capturePipelines ? [...new Set(input.capturePipelines)] : null,
      createdBy: input.createdBy ?? null,
      prefix: displayPrefix(secret),
      hash: hashKeySecret(secret),
    })
    .returning();
  return { key: key!, secret };
}

/**
 * A model key's capture scope names live pipelines of its team only: an unknown, deleted or
 * foreign id is a 404 naming `capturePipelines` (no write).
 */
async function checkCapturePipelines(db: DbOrTx, teamId: string, ids: string[]): Promise<void> {
  const found = await db
    .select({ id: pipelines.id })
    .from(pipelines)
    .where(and(eq(pipelines.teamId, teamId), inArray(pipelines.id, ids), isNull(pipelines.deletedAt)));
  const missing = ids.find((id) => !found.some((p) => p.id === id));
  if (missing !== undefined) throw notFound(`No pipeline with id '${missing}'.`, "capturePipelines");
}

export async function listApiKeys(db: DbOrTx, teamId: string) {
  return db
    .select({
      id: apiKeys.id,
      kind: apiKeys.kind,
      name: apiKeys.name,
      prefix: apiKeys.prefix,
      deploymentId: apiKeys.deploymentId,
      deploymentName: deployments.name,
      capturePipelines: apiKeys.capturePipelines,
      createdBy: users.email,
      createdAt: apiKeys.createdAt,
      lastUsedAt: apiKeys.lastUsedAt,
      revokedAt: apiKeys.revokedAt,
    })
    .from(apiKeys)
    .leftJoin(deployments, eq(deployments.id, apiKeys.deploymentId))
    .leftJoin(users, eq(users.id, apiKeys.createdBy))
    .where(eq(apiKeys.teamId, teamId))
    .orderBy(desc(apiKeys.createdAt));
}

/** Revokes a key. With `teamId`, a key of another team is "not found". Idempotent. */
export async function revokeApiKey(db: DbOrTx, input: { id: string; teamId?: string }): Promise<ApiKey> {
  const where = input.teamId
    ? and(eq(apiKeys.id, input.id), eq(apiKeys.teamId, input.teamId))
    : eq(apiKeys.id, input.id);
  const [key] = await db
    .update(apiKeys)
    .set({ revokedAt: sql`coalesce(${apiKeys.revokedAt}, now())` })
    .where(where)
    .returning();
  if (!key) throw notFound(`No key with id '${input.id}'.`, "id");
  // Other processes drop their cached keys when the NOTIFY of this commit reaches them; this one
  // at once, so the very next request it serves already sees the revocation.
  changeFeedOf(rawSql(db))?.invalidate("api_keys");
  return key;
}

export type KeyPrincipal = {
  key: Pick<ApiKey, "id" | "kind" | "deploymentId" | "capturePipelines" | "lastUsedAt">;
  team: Team;
};

/** last_used_at is written at most once a minute per key, never awaited on the request path. */
const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * Resolves `Authorization: Bearer <secret>` to its key and team. Missing, malformed, unknown,
 * revoked or wrong-kind keys all get 401 (with a message that helps the key's holder).
 */
export async function authenticateKey(
  db: DbOrTx,
  authorization: string | null | undefined,
  expected: KeyKind,
): Promise<KeyPrincipal> {
  const what = expected === "api" ? "API key" : "model key";
  if (!authorization) throw unauthorized(`Missing ${what}: send 'Authorization: Bearer <${what}>'.`);
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!m) throw unauthorized(`Malformed Authorization header: expected 'Bearer <${what}>'.`);
  const secret = m[1]!;
  const kind = secretKind(secret);
  if (!kind) throw unauthorized(`Invalid ${what}.`);
  if (kind !== expected) {
    throw unauthorized(
      expected === "api"
        ? "This is a model key; the hosted API takes an API key."
        : "This is an API key; deployments take a model key.",
    );
  }
  const row = await cachedKey(rawSql(db), hashKeySecret(secret));
  if (!row || row.kind !== expected) throw unauthorized(`Invalid ${what}.`);
  if (row.revoked_at) throw unauthorized(`This ${what} has been revoked.`);
  // drizzle's postgres.js client leaves timestamps as strings (drizzle maps them itself).
  const lastUsedAt = row.last_used_at === null ? null : new Date(row.last_used_at);
  touchLastUsed(db, row.id, lastUsedAt);
  return {
    key: {
      id: row.id,
      kind: row.kind,
      deploymentId: row.deployment_id,
      capturePipelines: row.capture_pipelines,
      lastUsedAt,
    },
    team: {
      id: row.team_id,
      slug: row.team_slug,
      name: row.team_name,
      createdAt: new Date(row.team_created_at),
      limits: row.team_limits,
    },
  };
}

/**
 * A key row by hash: from this process's cache when the pool has a change feed (entries are
 * dropped when api_keys, or teams, change: a revocation holds on every process within
 * milliseconds), else from the database. Unknown hashes are not cached.
 */
function cachedKey(sql: postgres.Sql, hash: string): Promise<KeyRow | null> {
  const feed = changeFeedOf(sql);
  if (!feed) return keyLookup(sql)(hash);
  const cache = feed.cache<string, KeyRow | null>("api_keys", KEY_CACHE);
  return cache.get(
    hash,
    () => keyLookup(sql)(hash),
    (row) => row !== null,
  );
}

const KEY_CACHE = { tables: ["api_keys", "teams"], ttlMs: 5 * 60_000, maxEntries: 10_000 };

/**
 * Key rows by hash. Concurrent lookups share one query (see createBatcher): every request still
 * reads the key after it arrived, so a revocation holds for the very next request.
 */
const keyLookup = perClient((sql: postgres.Sql) =>
  createBatcher<string, KeyRow | null>(
    async (hashes) => {
      const rows = await sql<(KeyRow & { hash: string })[]>`
        select k.hash, k.id, k.kind, k.deployment_id, k.capture_pipelines, k.last_used_at, k.revoked_at,
               t.id as team_id, t.slug as team_slug, t.name as team_name, t.created_at as team_created_at,
               t.limits as team_limits
        from api_keys k join teams t on t.id = k.team_id
        where k.hash in (select jsonb_array_elements_text(${JSON.stringify([...new Set(hashes)])}::jsonb))`;
      const byHash = new Map(rows.map((r) => [r.hash, r]));
      return hashes.map((h) => byHash.get(h) ?? null);
    },
    { maxInFlight: 2, maxBatch: 256 },
  ),
);

type KeyRow = {
  id: string;
  kind: KeyKind;
  deployment_id: string | null;
  capture_pipelines: string[] | null;
  last_used_at: string | null;
  revoked_at: string | null;
  team_id: string;
  team_slug: string;
  team_name: string;
  team_created_at: string;
  team_limits: TeamLimitOverrides | null;
};

const lastTouched = new Map<string, number>();

function touchLastUsed(db: DbOrTx, keyId: string, lastUsedAt: Date | null): void {
  const now = Date.now();
  const seen = Math.max(lastTouched.get(keyId) ?? 0, lastUsedAt?.getTime() ?? 0);
  if (now - seen < LAST_USED_RESOLUTION_MS) return;
  lastTouched.set(keyId, now);
  if (lastTouched.size > 10_000) lastTouched.clear();
  db.update(apiKeys)
    .set({ lastUsedAt: sql`now()` })
    .where(
      and(
        eq(apiKeys.id, keyId),
        sql`(${apiKeys.lastUsedAt} is null or ${apiKeys.lastUsedAt} < now() - interval '1 minute')`,
      ),
    )
    .then(
      () => {},
      (err: unknown) => logger().error({ err }, "last_used_at update failed"),
    );
}
