import { Counter, Gauge, Registry, collectDefaultMetrics } from "prom-client";
import type { Engine } from "./engine/engine";

/**
 * The worker's metrics, served as JSON on its internal API (GET /metrics) for the app, which
 * labels them with the worker's id and serves them with its own at GET /metrics. The engine's
 * figures are read at each scrape.
 */
export function workerMetrics(engine: Engine): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const sum = async (field: "queued" | "running" | "kvBytes" | "promptCacheBytes" | "promptCacheRoom") =>
    (await engine.loadStats()).reduce((a, s) => a + Number(s[field] ?? 0), 0);
  new Gauge({
    name: "lmp_engine_queue_depth",
    help: "Generation requests waiting for a batch slot, all models of the worker.",
    registers: [registry],
    async collect() {
      this.set(await sum("queued"));
    },
  });
  new Gauge({
    name: "lmp_engine_running_sequences",
    help: "Sequences decoding in the worker's batches.",
    registers: [registry],
    async collect() {
      this.set(await sum("running"));
    },
  });
  new Gauge({
    name: "lmp_kv_cache_bytes",
    help: "Bytes held by the batches' KV caches, room kept for the next rows included.",
    registers: [registry],
    async collect() {
      this.set(await sum("kvBytes"));
    },
  });
  new Gauge({
    name: "lmp_prompt_cache_bytes",
    help: "Bytes held by the prompt caches: finished prompts' caches kept for requests with the same prompt.",
    registers: [registry],
    async collect() {
      this.set(await sum("promptCacheBytes"));
    },
  });
  new Counter({
    name: "lmp_prompt_cache_hits",
    help: "Requests whose prefill a prompt cache answered, since the worker started (models unloaded since included).",
    registers: [registry],
    async collect() {
      this.reset();
      this.inc((await engine.counts()).promptCacheHits);
    },
  });
  new Counter({
    name: "lmp_prompt_cache_prefix_tokens",
    help: "Prompt tokens not prefilled because a kept prompt (or chat answer) of the same team began with them, since the worker started (models unloaded since included).",
    registers: [registry],
    async collect() {
      this.reset();
      this.inc((await engine.counts()).promptCachePrefixTokens);
    },
  });
  new Counter({
    name: "lmp_prompt_cache_answers",
    help: "Finished chat answers whose caches were kept for their conversation's next turn, since the worker started (models unloaded since included).",
    registers: [registry],
    async collect() {
      this.reset();
      this.inc((await engine.counts()).promptCacheAnswers);
    },
  });
  new Gauge({
    name: "lmp_prompt_cache_room_bytes",
    help: "Bytes the prompt caches may hold now: WORKER_PROMPT_CACHE_MB per model, plus what the batches leave of their KV budgets (WORKER_PROMPT_CACHE_IDLE).",
    registers: [registry],
    async collect() {
      this.set(await sum("promptCacheRoom"));
    },
  });
  return registry;
}
