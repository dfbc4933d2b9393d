import { sql } from "drizzle-orm";
import journal from "../../drizzle/meta/_journal.json";
import type { DbOrTx } from "../db/client";
import { withoutTeam } from "../contracts/models";
import { errorCause } from "../observe/error-cause";
import { liveWorkers } from "./inference-routing";

export type Health = {
  /**
   * ok: all well; degraded: serving, but no live worker (no generation, no packaging); migrating:
   * the database's schema is older than this app's (migrations still running); down: no database.
   */
  status: "ok" | "degraded" | "migrating" | "down";
  database: { ok: boolean; latencyMs?: number; error?: string; migrations?: { applied: number; expected: number } };
  /** models: the (model, dtype) keys live workers serve; present only for operators (see the route). */
  workers: { live: number; models?: string[] };
};

const DATABASE_TIMEOUT_MS = 2_000;

/** The migrations this app was built with (drizzle's journal). */
const EXPECTED_MIGRATIONS = journal.entries.length;
/** Once the schema has caught up it stays so: not read again. */
let schemaCurrent = false;

/** How many migrations the database has applied (0 before the first: no table yet). */
async function appliedMigrations(db: DbOrTx): Promise<number> {
  try {
    const [row] = await db.execute<{ n: number }>(sql`select count(*)::int as n from drizzle.__drizzle_migrations`);
    return row?.n ?? 0;
  } catch (err) {
    if ((err as { cause?: { code?: string } }).cause?.code === "42P01") return 0; // undefined_table
    throw err;
  }
}

/**
 * What the health route reports: the database answers in time, and which workers are live. With
 * `models` (the caller is an operator), also why the database does not answer, how far its
 * migrations are, and which models the workers serve: deployed model ids, which only operators may see (an id
 * like `acme/contracts-ft` tells whoever reads it what a team runs).
 */
export async function serviceHealth(db: DbOrTx, opts: { models: boolean }): Promise<Health> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${DATABASE_TIMEOUT_MS} ms`)), DATABASE_TIMEOUT_MS);
  });
  try {
    await Promise.race([db.execute(sql`select 1`), timeout]);
    const latencyMs = Math.round((performance.now() - started) * 10) / 10;
    // Readiness: an app that serves before its migrations have run answers 500s on every table or
    // column they add (an upgrade: npm start starts the app while it migrates).
    if (!schemaCurrent) {
      const applied = await Promise.race([appliedMigrations(db), timeout]);
      if (applied < EXPECTED_MIGRATIONS) {
        return {
          status: "migrating",
          database: {
            ok: true,
            latencyMs,
            ...(opts.models && { migrations: { applied, expected: EXPECTED_MIGRATIONS } }),
          },
          workers: { live: 0, ...(opts.models && { models: [] }) },
        };
      }
      schemaCurrent = true;
    }
    const live = await Promise.race([liveWorkers(db, { fresh: true }), timeout]);
    return {
      status: live.length > 0 ? "ok" : "degraded",
      database: { ok: true, latencyMs },
      // Team-placed keys name the team: shown without it.
      workers: {
        live: live.length,
        ...(opts.models && { models: [...new Set(live.flatMap((w) => w.models.map(withoutTeam)))].sort() }),
      },
    };
  } catch (err) {
    return {
      status: "down",
      // Why, to operators only: the cause names the database's address or its user.
      database: { ok: false, ...(opts.models && { error: errorCause(err) }) },
      workers: { live: 0, ...(opts.models && { models: [] }) },
    };
  } finally {
    clearTimeout(timer);
  }
}
