import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { freePort } from "../../lib/net/free-port";
import { appProcessArgs, workerProcessArgs } from "../../scripts/lib/app-process";
import { createScratchDatabase, startThrowawayDb } from "../../lib/db/throwaway";
import { cachedTinyModel } from "../../scripts/tiny-model/generate";

/**
 * One database and one production app server per integration project:
 * `embedded` (a throwaway embedded PostgreSQL 18) or `postgres` (the server at TEST_DATABASE_URL),
 * each with a fresh database for the suite.
 * The app is the built one, started as `npm start` starts it; `npm test` builds it first.
 */
declare module "vitest" {
  export interface ProvidedContext {
    baseUrl: string;
    databaseUrl: string;
    /** The server's admin URL, for tests that need databases of their own. */
    adminDatabaseUrl: string;
    authSecret: string;
    dataDir: string;
    tinyModel: string;
  }
}

const root = path.resolve(import.meta.dirname, "../..");

/** The server of a project: a throwaway embedded PostgreSQL, or TEST_DATABASE_URL's. */
async function databaseServer(kind: string): Promise<{ adminUrl: string; stop: () => Promise<void> }> {
  if (kind === "embedded") {
    const db = await startThrowawayDb();
    return { adminUrl: db.url, stop: db.stop };
  }
  const adminUrl = process.env.TEST_DATABASE_URL;
  if (!adminUrl) throw new Error("TEST_DATABASE_URL is required for the postgres project");
  return { adminUrl, stop: async () => {} };
}

export async function startApp(
  env: Record<string, string>,
): Promise<{ url: string; child: ChildProcess; logs: string[] }> {
  const port = await freePort();
  const logs: string[] = [];
  const child = spawn(process.execPath, appProcessArgs(port), {
    cwd: root,
    env: {
      ...process.env,
      ...env,
      PORT: String(port),
      PUBLIC_URL: `http://127.0.0.1:${port}`,
      NEXT_TELEMETRY_DISABLED: "1",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.on("data", (d: Buffer) => logs.push(d.toString()));
  child.stderr!.on("data", (d: Buffer) => logs.push(d.toString()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`app exited during start-up:\n${logs.join("")}`);
    try {
      if ((await fetch(`${url}/api/health`)).ok) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`app did not start:\n${logs.join("")}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return { url, child, logs };
}

/** A worker process (inference server + job loop) on the same database as the app. */
export async function startWorker(env: Record<string, string>): Promise<{ child: ChildProcess; logs: string[] }> {
  const logs: string[] = [];
  const child = spawn(process.execPath, workerProcessArgs(), {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.on("data", (d: Buffer) => logs.push(d.toString()));
  child.stderr!.on("data", (d: Buffer) => logs.push(d.toString()));
  const deadline = Date.now() + 60_000;
  while (!logs.join("").includes(" serving http")) {
    if (child.exitCode !== null) throw new Error(`worker exited during start-up:\n${logs.join("")}`);
    if (Date.now() > deadline) throw new Error(`worker did not start:\n${logs.join("")}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { child, logs };
}

export default async function setup(project: TestProject) {
  const kind = project.config.env?.TEST_DB ?? "embedded";
  const server = await databaseServer(kind);
  const db = await createScratchDatabase(server.adminUrl, "test");
  const dataDir = mkdtempSync(path.join(os.tmpdir(), `lmp-${kind}-`));
  const authSecret = "test-secret-0123456789-0123456789-abcdef";
  const tinyModel = await cachedTinyModel();
  const common = { DATABASE_URL: db.url, AUTH_SECRET: authSecret, DATA_DIR: dataDir };
  // Every sign-in of the suite comes from 127.0.0.1: the per-address limit would soon refuse
  // them (the limits have tests of their own).
  // Upstream deployments (tests/integration/upstream.test.ts): timeouts and the avoidance of a
  // failed URL short enough to be seen in a test.
  const upstream = {
    UPSTREAM_FIRST_BYTE_TIMEOUT_MS: "2000",
    UPSTREAM_IDLE_TIMEOUT_MS: "2000",
    UPSTREAM_AVOID_MS: "1500",
  };
  const app = await startApp({
    ...common,
    ...upstream,
    SIGNIN_ATTEMPTS_PER_ADDRESS: "100000",
    USAGE_FLUSH_MS: "100",
    // Owners may deploy model folders from the dashboard only from inside these, and upstream
    // servers on this machine only at this address (the tests' fake upstreams listen there).
    MODEL_FOLDERS: path.dirname(tinyModel),
    UPSTREAM_ALLOWED_HOSTS: "127.0.0.1",
  });
  // Maintenance (retention, deleted pipelines) every second and imports polled often: the tests
  // wait for them.
  const worker = await startWorker({
    ...common,
    WORKER_MODELS: tinyModel,
    WORKER_HEARTBEAT_SECONDS: "1",
    MAINTENANCE_INTERVAL_SECONDS: "1",
    IMPORT_POLL_MS: "100",
  });
  project.provide("baseUrl", app.url);
  project.provide("databaseUrl", db.url);
  project.provide("adminDatabaseUrl", server.adminUrl);
  project.provide("authSecret", authSecret);
  project.provide("dataDir", dataDir);
  project.provide("tinyModel", tinyModel);
  return async () => {
    for (const child of [worker.child, app.child]) {
      if (child.exitCode !== null) continue;
      child.kill("SIGTERM");
      await new Promise((r) => child.once("exit", r));
    }
    if (process.env.TEST_APP_LOGS) console.log(app.logs.join(""), worker.logs.join(""));
    await db.drop();
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  };
}
