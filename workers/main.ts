// The worker process: registers itself with a heartbeat, serves inference for the models of
// the deployments table (plus WORKER_MODELS) on its internal HTTP API, and advertises that
// API's address and its models so the app can route requests here. It also packages datasets
// (workers/packager): claims PROCESSING rows and writes their JSONL files to the blob store; stores
// imports (workers/importer); and runs retention and other deletions (workers/maintenance.ts).
// Started by `npm start` next to the app (or alone: `npm run worker`).
import { existsSync } from "node:fs";
import path from "node:path";
import { blobStore } from "@/lib/blob";
import { getDb } from "@/lib/db/client";
import { env } from "@/lib/env";
import { errorCause } from "@/lib/observe/error-cause";
import { workerSecret } from "@/lib/internal-secret";
import { servedModelKey, teamModelKey } from "@/lib/contracts/models";
import { jobTeams, places, placesByTeam } from "@/lib/contracts/placement";
import { listDeployedModels } from "@/lib/services/deployments";
import { Engine } from "./engine/engine";
import { hubOptionsFromEnv } from "./engine/model/hub/hub-config";
import { workerMetrics } from "./metrics";
import { ModelSupervisor, type Excluded, type Served } from "./model-supervisor";
import { startInferenceServer } from "./inference/server";
import { startImporter } from "./importer/importer-loop";
import { startMaintenance } from "./maintenance";
import { startPackager } from "./packager";
import { registerWorker } from "./registry";
import { logger } from "@/lib/observe/log";

process.env.LMP_PROCESS ??= "worker"; // the `proc` of its log lines

async function main(): Promise<void> {
  const e = env();
  // The app and the workers share a secret (their internal API): WORKER_SECRET, or one derived
  // from AUTH_SECRET, or DATA_DIR/auth-secret when they share DATA_DIR. A worker on another
  // machine with none of these made a secret of its own and looked live, while every call the
  // app sent it was refused.
  if (!process.env.WORKER_SECRET && !process.env.AUTH_SECRET && !existsSync(path.join(e.DATA_DIR, "auth-secret")))
    throw new Error(
      `no secret shared with the app: set WORKER_SECRET (or AUTH_SECRET) to the app's, or give this worker the ` +
        `app's DATA_DIR (it holds auth-secret); ${e.DATA_DIR} has none`,
    );
  const handle = getDb();

  // WORKER_MODELS are always loaded; the deployments table's models as WORKER_SERVES places them.
  const servedModels = async (): Promise<{ wanted: Served[]; excluded: Excluded[] }> => {
    const deployed = await listDeployedModels(handle.db);
    const byTeam = placesByTeam(e.WORKER_SERVES);
    const keyOf = (d: (typeof deployed)[number]) => {
      const key = servedModelKey(d.model, d.dtype);
      return byTeam ? teamModelKey(key, d.teamId) : key;
    };
    const served: typeof deployed = [];
    const left: typeof deployed = [];
    for (const d of deployed) (places(e.WORKER_SERVES, d) ? served : left).push(d);
    return {
      wanted: [
        ...e.WORKER_MODELS.map((model) => ({ model, dtype: "auto" as const })),
        ...served.map((d) => ({ model: d.model, dtype: d.dtype, keys: [keyOf(d)] })),
      ],
      excluded: left.map((d) => ({
        key: keyOf(d),
        what: `${d.model} (${d.dtype})${byTeam ? ` for team ${d.teamSlug}` : ""}`,
      })),
    };
  };
  const engine = new Engine({
    models: [],
    ...(e.WORKER_KV_CACHE_MB ? { kvBudgetBytes: e.WORKER_KV_CACHE_MB * 2 ** 20 } : {}),
    promptCacheBytes: e.WORKER_PROMPT_CACHE_MB * 2 ** 20,
    promptCacheAnswers: e.WORKER_PROMPT_CACHE_ANSWERS === "on",
    promptCacheIdleKv: e.WORKER_PROMPT_CACHE_IDLE === "on",
    loadOptions: (_id, dtype) => ({
      dtype,
      rowWiseQuantization: e.WORKER_ROW_QUANTIZATION === "on",
      ...(e.WORKER_MEMORY_CHECK === "off" ? { availableMemory: null } : {}),
    }),
  });
  // Publishes through the registration below (its first sync comes after it is made).
  const supervisor = new ModelSupervisor(engine, (models, modelStates) =>
    registration.advertise({ models, modelStates }),
  );
  const server = await startInferenceServer({
    engine,
    host: e.WORKER_HOST,
    port: e.WORKER_PORT,
    secret: workerSecret(),
    metrics: workerMetrics(engine),
    // Nothing until the first sync below: the worker advertises no model before it either.
    serves: (model, dtype, tenant) => supervisor.serves(model, dtype, tenant),
  });
  const registration = await registerWorker(handle.db, { heartbeatSeconds: e.WORKER_HEARTBEAT_SECONDS });
  await registration.advertise({ address: e.WORKER_ADVERTISE_URL?.replace(/\/+$/, "") ?? server.url });
  const served = await servedModels();
  supervisor.sync(served.wanted, served.excluded);
  const packager = startPackager({
    db: handle.db,
    blobs: blobStore(),
    owner: registration.id,
    leaseSeconds: e.DATASET_LEASE_SECONDS,
    teams: jobTeams(e.WORKER_SERVES),
    scratchDir: path.join(e.DATA_DIR, "tmp"),
    pollMs: e.DATASET_POLL_MS,
    maxAttempts: e.DATASET_MAX_ATTEMPTS,
    throttleMs: e.DATASET_THROTTLE_MS,
    throttleEvery: e.DATASET_THROTTLE_SAMPLES,
  });
  const importer = startImporter({
    db: handle.db,
    blobs: blobStore(),
    owner: registration.id,
    leaseSeconds: e.IMPORT_LEASE_SECONDS,
    teams: jobTeams(e.WORKER_SERVES),
    pollMs: e.IMPORT_POLL_MS,
    maxAttempts: e.IMPORT_MAX_ATTEMPTS,
    chunkLines: e.IMPORT_CHUNK_LINES,
    maxLineBytes: e.MAX_BODY_BYTES,
    throttleMs: e.IMPORT_THROTTLE_MS,
  });
  const maintenance = startMaintenance({
    db: handle.db,
    blobs: blobStore(),
    intervalSeconds: e.MAINTENANCE_INTERVAL_SECONDS,
    batch: e.DELETE_BATCH_SIZE,
    hubCache: { dir: hubOptionsFromEnv().cacheDir, keepHours: e.HUB_CACHE_KEEP_HOURS, alsoKeep: e.WORKER_MODELS },
  });
  logger().info(
    { worker: registration.id, address: server.url, models: engine.models },
    `worker ${registration.id} serving ${server.url}`,
  );

  // Follow the deployments table: a new deployment's model starts loading within one interval.
  const refresh = setInterval(() => {
    servedModels()
      .then(({ wanted, excluded }) => supervisor.sync(wanted, excluded))
      .catch((err: unknown) => logger().error({ err }, "model refresh failed"));
  }, e.WORKER_HEARTBEAT_SECONDS * 1000);
  refresh.unref();

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger().info({ signal }, "stopping");
    clearInterval(refresh);
    // Out of the registry first, so the app routes new requests elsewhere; then the generations
    // in flight may finish within the launcher's grace period.
    await registration.stop().catch((err: unknown) => logger().error({ err }, "deregistration failed"));
    // The job loops and the generations in flight stop side by side, within one grace period:
    // one after the other, the jobs' time was not taken off the generations' grace, and the
    // launcher's SIGKILL could land while they still drained.
    const graceMs = Math.max(0, e.SHUTDOWN_GRACE_SECONDS * 1000 - 2000);
    await Promise.all([
      packager.stop().catch((err: unknown) => logger().error({ err }, "packager stop failed")),
      importer.stop().catch((err: unknown) => logger().error({ err }, "importer stop failed")),
      maintenance.stop().catch((err: unknown) => logger().error({ err }, "maintenance stop failed")),
      server.close(graceMs).catch(() => {}),
    ]);
    await handle.close();
    process.exit(0);
  };
  process.on("SIGINT", () => void shutdown("SIGINT"));
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  // A closed terminal: an orderly stop too (the launcher's children get it with it).
  process.on("SIGHUP", () => void shutdown("SIGTERM"));
  // Started by the launcher with an IPC channel: when the launcher goes away (even killed with
  // -9), the channel closes and this worker stops as on SIGTERM, leaving no orphan behind.
  if (process.send) process.on("disconnect", () => void shutdown("launcher gone"));
}

main().catch((err: unknown) => {
  // Straight to stderr: the process exits at once, before an asynchronous log line could be written.
  console.error("[worker] failed to start:", errorCause(err));
  process.exit(1);
});
