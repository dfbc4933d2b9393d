import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import type { TestProject } from "vitest/node";
import { startEmbeddedDb } from "../../lib/db/embedded";
import { migrateDatabase } from "../../lib/db/migrate";
import { appProcessArgs } from "../../scripts/lib/app-process";
import { cachedTinyModel } from "../../scripts/tiny-model/generate";

/**
 * One database and one production app server per integration project:
 * `embedded` (PGlite over its socket) or `postgres` (a fresh database on TEST_DATABASE_URL).
 * The app is the built one (`next start`); `npm test` builds it first.
 */
declare module "vitest" {
  export interface ProvidedContext {
    baseUrl: string;
    databaseUrl: string;
    authSecret: string;
    dataDir: string;
    tinyModel: string;
  }
}

const root = path.resolve(import.meta.dirname, "../..");

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
    srv.on("error", reject);
  });
}

async function createDatabase(kind: string): Promise<{ url: string; drop: () => Promise<void> }> {
  if (kind === "embedded") {
    const db = await startEmbeddedDb({});
    return { url: db.url, drop: db.stop };
  }
  const admin = process.env.TEST_DATABASE_URL;
  if (!admin) throw new Error("TEST_DATABASE_URL is required for the postgres project");
  const name = `lmp_test_${process.pid}_${Date.now()}`;
  const sql = postgres(admin, { max: 1, onnotice: () => {} });
  await sql.unsafe(`create database ${name}`);
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      await sql.unsafe(`drop database if exists ${name} with (force)`);
      await sql.end();
    },
  };
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
  const child = spawn(process.execPath, ["--import", "tsx", path.join(root, "workers/main.ts")], {
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
  const db = await createDatabase(kind);
  await migrateDatabase(db.url);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), `lmp-${kind}-`));
  const authSecret = "test-secret-0123456789-0123456789-abcdef";
  const tinyModel = await cachedTinyModel();
  const common = { DATABASE_URL: db.url, AUTH_SECRET: authSecret, DATA_DIR: dataDir };
  const app = await startApp(common);
  const worker = await startWorker({ ...common, WORKER_MODELS: tinyModel, WORKER_HEARTBEAT_SECONDS: "1" });
  project.provide("baseUrl", app.url);
  project.provide("databaseUrl", db.url);
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
    rmSync(dataDir, { recursive: true, force: true });
  };
}
