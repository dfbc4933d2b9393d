// The worker process: registers itself with a heartbeat; later it serves inference and
// packages datasets. Started by `npm start` next to the app (or alone: `npm run worker`).
import { getDb } from "@/lib/db/client";
import { env } from "@/lib/env";
import { registerWorker } from "./registry";

async function main(): Promise<void> {
  const e = env();
  const handle = getDb();
  const registration = await registerWorker(handle.db, { heartbeatSeconds: e.WORKER_HEARTBEAT_SECONDS });
  console.log(`[worker] ${registration.id} registered (pid ${process.pid})`);

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`[worker] ${signal}: stopping`);
    await registration.stop().catch((err: unknown) => console.error("[worker] deregistration failed", err));
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
