import { sql } from "drizzle-orm";
import type { DbOrTx } from "../db/client";
import { withoutTeam } from "../contracts/models";
import { errorCause } from "../observe/error-cause";
import { liveWorkers } from "./inference-routing";

export type Health = {
  /** ok: all well; degraded: serving, but no live worker (no generation, no packaging); down: no database. */
  status: "ok" | "degraded" | "down";
  database: { ok: boolean; latencyMs?: number; error?: string };
  /** models: the (model, dtype) keys live workers serve; present only for operators (see the route). */
  workers: { live: number; models?: string[] };
};

const DATABASE_TIMEOUT_MS = 2_000;

/**
 * What the health route reports: the database answers in time, and which workers are live. With
 * `models`, also which models they serve: deployed model ids, which only operators may see (an id
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
      database: { ok: false, error: errorCause(err) },
      workers: { live: 0, ...(opts.models && { models: [] }) },
    };
  } finally {
    clearTimeout(timer);
  }
}
