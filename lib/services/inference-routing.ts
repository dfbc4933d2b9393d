// Chooses the worker that runs a generation. The `workers` table is the registry: a worker is
// live while its heartbeat is younger than three intervals. Workers that advertise the model come
// first, in turn (round robin); a worker that cannot be reached, is overloaded (429) or no longer
// serves the model is skipped for the next one, so a worker that went away costs one failed
// connection, not a failed request.
import { and, gt, isNotNull, sql } from "drizzle-orm";
import type { DbOrTx } from "../db/client";
import { servedModelKey, teamModelKey, type ModelState } from "../contracts/models";
import { workers } from "../db/schema";
import { env } from "../env";
import { abortedError, ApiError } from "../errors";
import { InferenceClient, InferenceError, WorkerLostError } from "../inference/client";
import { workerSecret } from "../internal-secret";
import { logger } from "../observe/log";

export type LiveWorker = { id: string; address: string; models: string[]; modelStates: Record<string, ModelState> };

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
    .select({ id: workers.id, address: workers.address, models: workers.models, modelStates: workers.modelStates })
    .from(workers)
    .where(and(isNotNull(workers.address), gt(workers.heartbeatAt, sql`now() - make_interval(secs => ${staleAfter})`)))
    .orderBy(workers.id);
  return rows.map((r) => ({ id: r.id, address: r.address!, models: r.models, modelStates: r.modelStates }));
}

let turn = 0;

/**
 * Workers that could not be reached or did not answer in time are tried last for a while (a
 * frozen worker would otherwise cost each request the response timeout until its heartbeat
 * goes stale), then get traffic again: the next request probes them.
 */
const AVOID_MS = 10_000;
const avoidUntil = new Map<string, number>();
const avoided = (w: LiveWorker) => (avoidUntil.get(w.id) ?? 0) > Date.now();

/**
 * Where a served model stands across the live workers, for a deployment of team `teamId`: the
 * best state any of them reports under its key or, from a worker that places teams
 * (WORKER_SERVES), under the team's key (ready > loading > downloading > pending > failed). Null
 * when no live worker knows it yet. `excluded` only when every live worker leaves it out: one that
 * has not reported it yet may still load it (a deployment created a moment ago).
 */
export function deploymentState(live: LiveWorker[], key: string, teamId?: string): ModelState | null {
  const rank = { ready: 5, loading: 4, downloading: 3, pending: 2, failed: 1, excluded: 0 } as const;
  const teamKey = teamId === undefined ? null : teamModelKey(key, teamId);
  const reportOf = (w: LiveWorker): ModelState | undefined => {
    const own = teamKey === null ? undefined : w.modelStates[teamKey];
    const reported = own && own.state !== "excluded" ? own : (w.modelStates[key] ?? own);
    return servesFor(w, key, teamKey) ? { ...reported, state: "ready", at: reported?.at ?? "" } : reported;
  };
  let best: ModelState | null = null;
  let excluding = 0;
  for (const w of live) {
    const s = reportOf(w);
    if (!s) continue;
    if (s.state === "excluded") excluding++;
    if (!best || rank[s.state] > rank[best.state] || (s.state === best.state && (s.done ?? 0) > (best.done ?? 0)))
      best = s;
  }
  if (best?.state === "excluded" && excluding < live.length) return null;
  return best;
}

/** Whether worker `w` takes requests for `key`: for every team, or for the team of `teamKey`. */
const servesFor = (w: LiveWorker, key: string, teamKey: string | null) =>
  w.models.includes(key) || (teamKey !== null && w.models.includes(teamKey));

/** How long a request waits for a model that a worker is loading (not downloading) right now. */
const LOADING_WAIT_MS = 10_000;

/**
 * The live workers that serve `key` (servedModelKey), rotated so consecutive requests spread
 * over them. When none does yet:
 * - a worker is downloading it: 503 at once, with the progress and Retry-After;
 * - a worker is loading it (or about to): the request waits up to 10 s for it;
 * - every worker that knows it failed to load it: 503 with the reason;
 * - every live worker leaves it out (WORKER_SERVES): 503 at once, saying so;
 * - no live worker knows it yet (a deployment created a moment ago: workers pick new ones up
 *   within one heartbeat): the request waits up to two heartbeats.
 * An empty list means no worker at all (503 "no worker").
 */
export async function workersFor(
  db: DbOrTx,
  key: string,
  signal?: AbortSignal,
  options: { fresh?: boolean; exclude?: ReadonlySet<string>; teamId?: string } = {},
): Promise<LiveWorker[]> {
  const teamKey = options.teamId === undefined ? null : teamModelKey(key, options.teamId);
  const started = Date.now();
  const unknownWaitMs = Math.min(2 * env().WORKER_HEARTBEAT_SECONDS * 1000, 10_000);
  for (let attempt = 0; ; attempt++) {
    const live = (await liveWorkers(db, { fresh: options.fresh || attempt > 0 })).filter(
      (w) => !options.exclude?.has(w.id),
    );
    const serving = live.filter((w) => servesFor(w, key, teamKey));
    if (serving.length > 0) {
      const start = turn++ % serving.length;
      const rotated = [...serving.slice(start), ...serving.slice(0, start)];
      return [...rotated.filter((w) => !avoided(w)), ...rotated.filter(avoided)];
    }
    // The cached registry may predate a worker's registration (one restarted a moment ago).
    if (attempt === 0 && !options.fresh) continue;
    const state = deploymentState(live, key, options.teamId);
    if (state?.state === "downloading") throw modelDownloading(state);
    if (state?.state === "failed") throw modelFailed(state);
    if (state?.state === "excluded") throw modelExcluded(key);
    const waited = Date.now() - started;
    const limit = state ? LOADING_WAIT_MS : unknownWaitMs;
    if (live.length === 0 || waited >= limit || signal?.aborted) {
      if (signal?.reason instanceof ApiError) throw signal.reason; // the key was revoked meanwhile
      if (state) throw modelNotReady(state);
      return [];
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

const modelDownloading = (s: ModelState) => {
  const pct = s.total ? ` (${Math.floor((100 * (s.done ?? 0)) / s.total)}% of ${megabytes(s.total)})` : "";
  return new ApiError(
    503,
    "internal",
    `This deployment's model is still downloading${pct}; retry shortly.`,
    undefined,
    { "retry-after": "10" },
  );
};
const modelNotReady = (s: ModelState) =>
  new ApiError(503, "internal", `This deployment's model is still ${s.state}; retry shortly.`, undefined, {
    "retry-after": "5",
  });
// A failed load is tried again by the worker a minute later (workers/model-supervisor.ts).
const modelFailed = (s: ModelState) =>
  new ApiError(
    503,
    "internal",
    `This deployment's model could not be loaded: ${s.error ?? "unknown error"}`,
    undefined,
    {
      "retry-after": "60",
    },
  );
const modelExcluded = (key: string) =>
  new ApiError(503, "internal", unplacedMessage(key.slice(0, key.lastIndexOf("#"))), undefined, {
    "retry-after": "60",
  });
/** What a deployment that no live worker is set to serve says (its state's message, its requests' 503). */
export const unplacedMessage = (model: string) =>
  `No running worker serves this deployment's model (${model}): every live worker's WORKER_SERVES leaves it out. ` +
  "Start a worker whose WORKER_SERVES includes it, or unset WORKER_SERVES on one.";
const megabytes = (bytes: number) => `${(bytes / 1e6).toFixed(bytes < 1e7 ? 1 : 0)} MB`;

/** Worker errors (engine codes) as the platform's HTTP errors. */
export function toApiError(e: InferenceError): ApiError {
  switch (e.type) {
    case "invalid_request":
      return new ApiError(400, "invalid_request", e.message, e.param);
    case "context_length_exceeded":
      return new ApiError(400, "context_length_exceeded", e.message, e.param ?? "max_tokens");
    case "rate_limited":
      // The worker's own words ("engine overloaded: 64 of this team's requests already queued…"):
      // it is the team's queue that is full, not every team's. Retry-After as every 429 has.
      return new ApiError(429, "rate_limited", e.message, undefined, { "retry-after": "1" });
    default:
      // A stream that broke off (502) or went silent (504), the worker's or an upstream's, keeps its
      // status: before, a non-streamed completion said 500 for them, and the docs 502 and 504.
      return new ApiError(
        e.status === 502 || e.status === 504 ? e.status : 500,
        "internal",
        `Generation failed: ${e.message}`,
      );
  }
}

const unavailable = (model: string) =>
  new ApiError(
    503,
    "internal",
    `No worker is serving this deployment's model (${model}) right now; retry shortly.`,
    undefined,
    { "retry-after": "5" },
  );

/** A worker that has not (or no longer) got the model answers 404 with param "model". */
const modelNotServed = (e: InferenceError) => e.status === 404 && e.param === "model";

/**
 * Runs `call` against a worker serving `model`, failing over to the next live worker when one
 * cannot be reached, is overloaded or does not serve the model. Any other worker error is the
 * request's own (400, context length, 500) and is thrown as an ApiError at once.
 */
export async function withWorker<T>(
  db: DbOrTx,
  target: { model: string; dtype: string; teamId: string },
  call: (client: InferenceClient) => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  const { model, teamId } = target;
  const key = servedModelKey(model, target.dtype);
  let candidates = await workersFor(db, key, signal, { teamId });
  let last: InferenceError | undefined;
  let lost = 0;
  const tried = new Set<string>();
  for (let i = 0; i < candidates.length; i++) {
    const w = candidates[i]!;
    tried.add(w.id);
    const client = new InferenceClient({ url: w.address, secret: workerSecret() });
    try {
      return await call(client);
    } catch (e) {
      // The client went away (nobody reads the answer): not an error worth a log line.
      if (signal?.aborted) throw abortedError(signal);
      // A worker that died under a non-streamed generation: its client has seen nothing yet, so
      // the next worker runs it (before, a 500), as for a worker that never answered.
      if (e instanceof WorkerLostError) {
        avoidUntil.set(w.id, Date.now() + AVOID_MS);
        // Once: a request under which a second worker dies may be what ends them (a prompt that
        // crashes the runtime), and before, it was sent to every worker of the fleet in turn.
        if (++lost >= 2)
          throw new ApiError(
            502,
            "internal",
            "The worker running this request stopped while it ran, and so did the one it was retried on: it is not tried again.",
          );
        logger().warn({ worker: w.id, address: w.address }, "worker lost mid-generation; trying another");
      } else if (e instanceof InferenceError) {
        if (e.status === 429 || modelNotServed(e)) {
          last = e;
          continue;
        }
        if (e.status === 401) throw new ApiError(500, "internal", "The worker refused the app's internal secret.");
        throw toApiError(e);
      } else {
        // No answer before the response started: the worker is gone (crashed, stopped,
        // unreachable) or frozen (WorkerTimeoutError). The next worker gets the request.
        avoidUntil.set(w.id, Date.now() + AVOID_MS);
        logger().warn({ worker: w.id, address: w.address, err: e }, "worker unreachable");
      }
    }
    // Every worker of the (cached) registry failed: one fresh read may know a new one (a worker
    // restarted a moment ago registers under a new id and address). The workers tried are left
    // out before anything else, so a new worker still loading the model is waited for as when
    // no worker serves it yet, rather than the request failing on the dead one's fresh row.
    // So with workers that turned the request away as not theirs (a worker restarted with other
    // WORKER_SERVES): the fresh read knows where the model is now.
    if (i === candidates.length - 1 && (!last || modelNotServed(last))) {
      const fresh = await workersFor(db, key, signal, { fresh: true, exclude: tried, teamId });
      candidates = [...candidates, ...fresh];
    }
  }
  if (last?.status === 429) throw toApiError(last);
  if (last && modelNotServed(last)) throw new ApiError(500, "internal", `Generation cannot start: ${last.message}`);
  throw unavailable(model);
}
