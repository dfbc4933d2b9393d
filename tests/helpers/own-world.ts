// A world of a test's own: a scratch database, a data folder, an app and a worker on them, and a
// database handle. For tests that stop or watch these processes (their logs, their exit), which
// the shared app and worker of global-setup must not be.
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { inject } from "vitest";
import { connect, type DbHandle } from "@/lib/db/client";
import { startApp, startWorker } from "../setup/global-setup";
import { scratchDatabase } from "./scratch-database";

export interface OwnWorld {
  app: Awaited<ReturnType<typeof startApp>>;
  worker: Awaited<ReturnType<typeof startWorker>>;
  handle: DbHandle;
  dataDir: string;
  /** Stops the processes still running (SIGTERM, then waits for their exit), drops the database, removes the folder. */
  close(): Promise<void>;
}

/**
 * Starts the world. `app` and `worker` add to the environment both share (DATABASE_URL,
 * AUTH_SECRET, DATA_DIR); the worker beats every second and loads no model until a deployment
 * names one.
 */
export async function ownWorld(
  name: string,
  extra: { app?: Record<string, string>; worker?: Record<string, string> } = {},
): Promise<OwnWorld> {
  const database = await scratchDatabase();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), `lmp-${name}-`));
  const env = { DATABASE_URL: database.url, AUTH_SECRET: inject("authSecret"), DATA_DIR: dataDir };
  const children: ChildProcess[] = [];
  let handle: DbHandle | undefined;
  const close = async () => {
    await handle?.close();
    for (const c of children.reverse()) {
      if (c.exitCode !== null || c.signalCode !== null) continue;
      const exited = new Promise((r) => c.once("exit", r));
      c.kill("SIGTERM");
      await exited;
    }
    await database.drop();
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    const app = await startApp({ ...env, ...extra.app });
    children.push(app.child);
    const worker = await startWorker({ ...env, WORKER_HEARTBEAT_SECONDS: "1", WORKER_MODELS: "", ...extra.worker });
    children.push(worker.child);
    handle = connect(database.url, { max: 2 });
    return { app, worker, handle, dataDir, close };
  } catch (e) {
    await close();
    throw e;
  }
}
