// The worker process: registers itself with a heartbeat, serves inference for the models of
// the deployments table (plus WORKER_MODELS) on its internal HTTP API, and advertises that
// API's address and its models so the app can route requests here. It also packages datasets
// (workers/packager): claims PROCESSING rows and writes their JSONL files to the blob store. Started by `npm start`
// next to the app (or alone: `npm run worker`).
import { blobStore } from "@/lib/blob";
import { getDb } from "@/lib/db/client";
import { env } from "@/lib/env";
import { workerSecret } from "@/lib/internal-secret";
import { listDeployedModels } from "@/lib/services/deployments";
import { Engine } from "./engine/engine";
import { startInferenceServer } from "./inference/server";
import { startPackager } from "./packager";
import { registerWorker } from "./registry";

async function main(): Promise<void> {
  const e = env();
  const handle = getDb();

  const servedModels = async () => [...new Set([...e.WORKER_MODELS, ...(await listDeployedModels(handle.db))])];
  const engine = new Engine({ models: await servedModels() });
  const server = await startInferenceServer({
    engine,
    host: e.WORKER_HOST,
    port: e.WORKER_PORT,
    secret: workerSecret(),
  });
  const registration = await registerWorker(handle.db, { heartbeatSeconds: e.WORKER_HEARTBEAT_SECONDS });
  await registration.advertise({ address: server.url, models: [...engine.models] });
  const packager = startPackager({
    db: handle.db,
    blobs: blobStore(),
    owner: registration.id,
    leaseSeconds: e.DATASET_LEASE_SECONDS,
    pollMs: e.DATASET_POLL_MS,
    batchSize: e.DATASET_BATCH_SIZE,
    maxAttempts: e.DATASET_MAX_ATTEMPTS,
    throttleMs: e.DATASET_THROTTLE_MS,
  });
  console.log(
    `[worker] ${registration.id} serving ${server.url} (pid ${process.pid}); models: ${engine.models.join(", ") || "none yet"}`,
  );

  // Follow the deployments table: a new deployment's model becomes servable within one interval.
  const refresh = setInterval(() => {
    servedModels()
      .then(async (models) => {
        engine.setModels(models);
        await registration.advertise({ models });
      })
      .catch((err: unknown) => console.error("[worker] model refresh failed", err));
  }, e.WORKER_HEARTBEAT_SECONDS * 1000);
  refresh.unref();

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`[worker] ${signal}: stopping`);
    clearInterval(refresh);
    await packager.stop().catch((err: unknown) => console.error("[worker] packager stop failed", err));
    await registration.stop().catch((err: unknown) => console.error("[worker] deregistration failed", err));
    await server.close().catch(() => {});
    await handle.close();
    process.exit(0);
  };
  process.on("SIGINT", () => void shutdown("SIGINT"));
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
}

main().catch((err: unknown) => {
  console.error("[worker] failed to start:", err instanceof Error ? err.message : err);
  process.exit(1);
});
