// Chooses the worker that runs a generation. The `workers` table is the registry: a worker is
// live while its heartbeat is younger than three intervals. Workers that advertise the model come
// first, in turn (round robin); a worker that cannot be reached, is overloaded (429) or no longer
// serves the model is skipped for the next one, so a worker that went away costs one failed
// connection, not a failed request.
import { and, gt, isNotNull, sql } from "drizzle-orm";
import type { DbOrTx } from "../db/client";
import { workers } from "../db/schema";
import { env } from "../env";
import { ApiError } from "../errors";
import { InferenceClient, InferenceError } from "../inference/client";
import { workerSecret } from "../internal-secret";

export type LiveWorker = { id: string; address: string; models: string[] };

/**
 * The registry read is on the path to every first token, so it is kept for a second: a worker
 * that appears is used at most that much later, one that vanished is skipped by failover.
 */
const REGISTRY_CACHE_MS = 1000;
const registryCache = new WeakMap<object, { at: number; workers: LiveWorker[] }>();

export async function liveWorkers(db: DbOrTx, options: { fresh?: boolean } = {}): Promise<LiveWorker[]> {
  const cached = registryCache.get(db);
  if (!options.fresh && cached && Date.now() - cached.at < REGISTRY_CACHE_MS) return cached.workers;
  const rows = await readLiveWorkers(db);
  registryCache.set(db, { at: Date.now(), workers: rows });
  return rows;
}

async function readLiveWorkers(db: DbOrTx): Promise<LiveWorker[]> {
  const staleAfter = 3 * env().WORKER_HEARTBEAT_SECONDS;
  const rows = await db
    .select({ id: workers.id, address: workers.address, models: workers.models })
    .from(workers)
    .where(and(isNotNull(workers.address), gt(workers.heartbeatAt, sql`now() - make_interval(secs => ${staleAfter})`)))
    .orderBy(workers.id);
  return rows.map((r) => ({ id: r.id, address: r.address!, models: r.models }));
}

let turn = 0;

/**
 * The live workers that advertise `model`, rotated so consecutive requests spread over them.
 * When live workers exist but none advertises the model yet (a deployment created a moment
 * ago: workers pick new models up within one heartbeat), waits up to two intervals for one.
 */
export async function workersFor(db: DbOrTx, model: string, signal?: AbortSignal): Promise<LiveWorker[]> {
  const waitMs = Math.min(2 * env().WORKER_HEARTBEAT_SECONDS * 1000, 10_000);
  const deadline = Date.now() + waitMs;
  for (let attempt = 0; ; attempt++) {
    const live = await liveWorkers(db, { fresh: attempt > 0 });
    const serving = live.filter((w) => w.models.includes(model));
    if (serving.length > 0) {
      const start = turn++ % serving.length;
      return [...serving.slice(start), ...serving.slice(0, start)];
    }
    if (live.length === 0 || Date.now() >= deadline || signal?.aborted) return [];
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Worker errors (engine codes) as the platform's HTTP errors. */
export function toApiError(e: InferenceError): ApiError {
  switch (e.type) {
    case "invalid_request":
      return new ApiError(400, "invalid_request", e.message, e.param);
    case "context_length_exceeded":
      return new ApiError(400, "context_length_exceeded", e.message, e.param ?? "max_tokens");
    case "rate_limited":
      return new ApiError(429, "rate_limited", "Every worker serving this model is busy; retry shortly.");
    default:
      return new ApiError(500, "internal", `Generation failed: ${e.message}`);
  }
}

const unavailable = (model: string) =>
  new ApiError(503, "internal", `No worker is serving this deployment's model (${model}) right now; retry shortly.`);

/** A worker that has not (or no longer) got the model answers 404 with param "model". */
const modelNotServed = (e: InferenceError) => e.status === 404 && e.param === "model";

/**
 * Runs `call` against a worker serving `model`, failing over to the next live worker when one
 * cannot be reached, is overloaded or does not serve the model. Any other worker error is the
 * request's own (400, context length, 500) and is thrown as an ApiError at once.
 */
export async function withWorker<T>(
  db: DbOrTx,
  model: string,
  call: (client: InferenceClient) => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  const candidates = await workersFor(db, model, signal);
  let last: InferenceError | undefined;
  for (const w of candidates) {
    const client = new InferenceClient({ url: w.address, secret: workerSecret() });
    try {
      return await call(client);
    } catch (e) {
      // The client went away (nobody reads the answer): not an error worth a log line.
      if (signal?.aborted) throw new ApiError(499, "internal", "The client closed the request.");
      if (e instanceof InferenceError) {
        if (e.status === 429 || modelNotServed(e)) {
          last = e;
          continue;
        }
        if (e.status === 401) throw new ApiError(500, "internal", "The worker refused the app's internal secret.");
        throw toApiError(e);
      }
      // fetch() rejected before any response: the worker is gone (crashed, stopped, unreachable).
      console.warn(`[routing] worker ${w.id} at ${w.address} unreachable: ${(e as Error).message}`);
    }
  }
  if (last?.status === 429) throw toApiError(last);
  if (last && modelNotServed(last)) throw new ApiError(500, "internal", `Generation cannot start: ${last.message}`);
  throw unavailable(model);
}
