import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/**
 * The app's Prometheus metrics (prom-client), on one registry kept on globalThis (Next.js loads
 * the App Router's and the Pages Router's bundles separately; both must count into the same
 * series). GET /metrics serves these plus every live worker's (labelled `worker`). Names and
 * labels are documented in docs/api.md ("Metrics"). METRICS=off turns the recording off (the
 * ingest bench compares both).
 */
type AppMetrics = {
  registry: Registry;
  httpRequests: Counter<"route" | "method" | "status">;
  httpDuration: Histogram<"route" | "method">;
  generations: Counter<"deployment" | "status">;
  generatedTokens: Counter<"deployment">;
  promptTokens: Counter<"deployment">;
  ttft: Histogram<"deployment">;
  samplesAdded: Counter;
  captureStored: Counter;
  captureFailures: Counter<"reason">;
  datasetJobs: Gauge<"status">;
  upstreamRequests: Counter<"upstream" | "outcome">;
  upstreamBroken: Counter<"upstream">;
  upstreamInFlight: Gauge<"upstream">;
  upstreamAvoided: Gauge<"upstream">;
};

const holder = globalThis as unknown as { __lmpMetrics?: AppMetrics };

export const metricsEnabled = () => process.env.METRICS !== "off";

export function appMetrics(): AppMetrics {
  if (holder.__lmpMetrics) return holder.__lmpMetrics;
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const m: AppMetrics = {
    registry,
    httpRequests: new Counter({
      name: "http_requests_total",
      help: "HTTP requests answered, by route pattern, method and status.",
      labelNames: ["route", "method", "status"],
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: "http_request_duration_seconds",
      help: "Time to the response's start (a stream's first byte), by route pattern and method.",
      labelNames: ["route", "method"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    generations: new Counter({
      name: "lmp_generation_requests_total",
      help: "Completions by deployment (team/name) and how they ended (ok, error, cancelled).",
      labelNames: ["deployment", "status"],
      registers: [registry],
    }),
    generatedTokens: new Counter({
      name: "lmp_generated_tokens_total",
      help: "Completion tokens generated, by deployment.",
      labelNames: ["deployment"],
      registers: [registry],
    }),
    promptTokens: new Counter({
      name: "lmp_prompt_tokens_total",
      help: "Prompt tokens read, by deployment.",
      labelNames: ["deployment"],
      registers: [registry],
    }),
    ttft: new Histogram({
      name: "lmp_time_to_first_token_seconds",
      help: "Time from a streamed completion's arrival to its first token, by deployment.",
      labelNames: ["deployment"],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    samplesAdded: new Counter({
      name: "lmp_samples_added_total",
      help: "Samples stored in pipelines (add, and captured completions).",
      registers: [registry],
    }),
    captureStored: new Counter({
      name: "lmp_capture_samples_total",
      help: "Samples stored from captured completions (also counted in lmp_samples_added_total).",
      registers: [registry],
    }),
    captureFailures: new Counter({
      name: "lmp_capture_write_failures_total",
      help: "Captured samples that could not be stored after their retries, by reason (pipeline_gone, error).",
      labelNames: ["reason"],
      registers: [registry],
    }),
    datasetJobs: new Gauge({
      name: "lmp_dataset_jobs",
      help: "Datasets by status (read from the database at each scrape).",
      labelNames: ["status"],
      registers: [registry],
    }),
    upstreamRequests: new Counter({
      name: "lmp_upstream_requests_total",
      help: "Requests sent to upstream servers, by URL and how the answer began (ok, client_error, server_error, timeout, unreachable).",
      labelNames: ["upstream", "outcome"],
      registers: [registry],
    }),
    upstreamBroken: new Counter({
      name: "lmp_upstream_broken_streams_total",
      help: "Upstream answers that broke off after they began (an error event, a cut connection, a silence past the idle timeout), by URL.",
      labelNames: ["upstream"],
      registers: [registry],
    }),
    upstreamInFlight: new Gauge({
      name: "lmp_upstream_in_flight",
      help: "Requests open on each upstream URL (this app process; read at each scrape).",
      labelNames: ["upstream"],
      registers: [registry],
    }),
    upstreamAvoided: new Gauge({
      name: "lmp_upstream_avoided",
      help: "1 while an upstream URL that failed is passed over (UPSTREAM_AVOID_MS), else 0 (read at each scrape).",
      labelNames: ["upstream"],
      registers: [registry],
    }),
  };
  holder.__lmpMetrics = m;
  return m;
}
