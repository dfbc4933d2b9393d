import { timingSafeEqual, createHash } from "node:crypto";
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from "prom-client";
import { sql } from "drizzle-orm";
import type { DbOrTx } from "../db/client";
import { env } from "../env";
import { workerSecret } from "../internal-secret";
import { upstreamHealth } from "../inference/backends/upstream";
import { liveWorkers } from "../services/inference-routing";
import { appMetrics } from "./metrics";

const digest = (s: string) => createHash("sha256").update(s).digest();
const LOOPBACK = new Set(["127.0.0.1", "::1", "::ffff:127.0.0.1"]);
/** PUBLIC_URL hosts of a service reached on this machine only. */
const LOCAL_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]"]);

/** Headers a proxy adds to what it forwards: a request carrying one came from further away. */
const FORWARDING = ["x-forwarded-for", "forwarded", "x-real-ip", "x-forwarded-host"];
/**
 * Set by the app's server (scripts/lib/app-server.mjs) from the headers the request came with,
 * before Next.js adds x-forwarded-* headers of its own: "1" when a proxy forwarded it, else
 * "0:" and the process's LMP_PROXIED_NONCE.
 */
const PROXIED_HEADER = "x-lmp-proxied";

/**
 * Who may read /metrics: with METRICS_TOKEN set, a request bearing it (from anywhere); without,
 * only a request from this machine, to a service whose PUBLIC_URL is local: the connection's own
 * address is loopback and no proxy says it forwarded the request (a proxy on the same host
 * connects from loopback for every client of the Internet it serves).
 */
export function metricsAccess(
  headers: Record<string, string | string[] | undefined>,
  remoteAddress: string | undefined,
): 200 | 401 | 403 {
  const token = env().METRICS_TOKEN;
  if (token) return timingSafeEqual(digest(String(headers.authorization ?? "")), digest(`Bearer ${token}`)) ? 200 : 401;
  // The app's server says "not proxied" with a secret of this process (a client may send the
  // header too); without it (`next start`), Next.js's own x-forwarded-* headers are among
  // FORWARDING, so every request is refused: set METRICS_TOKEN there.
  // A public PUBLIC_URL: a proxy on this machine may forward requests without saying so (nginx's
  // plain proxy_pass adds no X-Forwarded-For), and each would look local. Before, such a setup
  // served /metrics (and the workers' models in /api/health) to the Internet.
  if (!LOCAL_HOSTS.has(new URL(env().PUBLIC_URL).hostname)) return 403;
  const nonce = process.env.LMP_PROXIED_NONCE;
  const local = nonce ? headers[PROXIED_HEADER] === `0:${nonce}` : !FORWARDING.some((h) => headers[h] !== undefined);
  if (!local) return 403;
  return LOOPBACK.has(remoteAddress ?? "") ? 200 : 403;
}

/**
 * The whole service in one scrape, Prometheus text format: the app's metrics (this process), the
 * dataset jobs by status and the upstream URLs' state (read now), and every live worker's
 * metrics, labelled `worker`. A worker that does not answer within 2 s is left out of this scrape.
 */
export async function scrapeAll(db: DbOrTx): Promise<{ text: string; contentType: string }> {
  const m = appMetrics();
  const jobs = await db.execute<{ status: string; n: number }>(
    sql`select status, count(*)::int as n from datasets where deleted_at is null group by status`,
  );
  m.datasetJobs.reset();
  for (const status of ["PROCESSING", "READY", "FAILED"]) {
    m.datasetJobs.set({ status }, jobs.find((j) => j.status === status)?.n ?? 0);
  }
  m.upstreamInFlight.reset();
  m.upstreamAvoided.reset();
  for (const h of upstreamHealth()) {
    m.upstreamInFlight.set({ upstream: h.upstream }, h.inFlight);
    m.upstreamAvoided.set({ upstream: h.upstream }, h.avoided ? 1 : 0);
  }
  const workers = await liveWorkers(db, { fresh: true });
  const fromWorkers = await Promise.all(
    workers.map(async (w) => {
      try {
        const res = await fetch(`${w.address}/metrics`, {
          headers: { authorization: `Bearer ${workerSecret()}` },
          signal: AbortSignal.timeout(2_000),
        });
        if (!res.ok) return [];
        const metrics = (await res.json()) as MetricObjectWithValues<MetricValue<string>>[];
        return metrics.map((x) => ({
          ...x,
          values: x.values.map((v) => ({ ...v, labels: { ...v.labels, worker: w.id } })),
        }));
      } catch {
        return [];
      }
    }),
  );
  const own = await m.registry.getMetricsAsJSON();
  // Each process's series are apart already (the workers' carry their `worker` label): the
  // metrics prom-client marks "omit" for aggregation (process_start_time_seconds, what restart
  // detection reads) are kept rather than dropped.
  const kept = (metrics: MetricObjectWithValues<MetricValue<string>>[]) =>
    metrics.map((x) => (x.aggregator === "omit" ? { ...x, aggregator: "first" as const } : x));
  const merged = AggregatorRegistry.aggregate([own, ...fromWorkers.filter((x) => x.length > 0)].map(kept));
  return { text: await merged.metrics(), contentType: merged.contentType };
}
