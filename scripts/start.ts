// `npm start`: builds the app if needed, starts the embedded database (unless DATABASE_URL is
// set), applies migrations, seeds a demo team on first run, then runs the web app and the
// worker until Ctrl-C, which stops every process it started.
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { connect } from "@/lib/db/client";
import { embeddedDbUrl, newDbPassword, readDbPassword, type EmbeddedDb } from "@/lib/db/embedded";
import { migrateDatabase } from "@/lib/db/migrate";
import { readEmbeddedInfo } from "@/lib/db/url";
import { EnvError, parseEnv } from "@/lib/env";
import { errorCause } from "@/lib/observe/error-cause";
import { workerSecret } from "@/lib/internal-secret";
import { freePort } from "@/lib/net/free-port";
import { lockAbandoned, readLock, takeOverLock, tryLock } from "@/lib/pid-lock";
import { prepareDemoUser, repointDemoModel, seedDemo, type DemoCredentials } from "@/lib/services/demo";
import { appProcessArgs, workerProcessArgs } from "./lib/app-process";
import { ensureBuild } from "./lib/build";
import { embeddedPaths, startAppEmbeddedDb } from "./lib/database";
import { Supervisor } from "./lib/supervisor";

// A worker that keeps crashing (a model whose load crashes it natively, its port taken) does not
// take the web app down with it: ingest, the dashboard (where the deployment can be deleted) and
// upstream deployments keep working, and it is tried again every 30 s. The app itself stops all.
let workerWarned = false;
const supervisor = new Supervisor({
  onGiveUp: (name) => {
    if (name === "worker") {
      if (!workerWarned)
        console.error(
          "[start] the worker keeps exiting (its log above says why); the web app keeps running, and the " +
            "worker is started again every 30 s. A deployment whose model crashes it can be deleted from " +
            "the dashboard or with `npm run cli -- deployment:delete`.",
        );
      workerWarned = true;
      return true;
    }
    void shutdown(1);
    return false;
  },
});
let embedded: EmbeddedDb | undefined;
/** The embedded database while it starts (null once it has, or failed): a stop meanwhile waits for it, then stops it too. */
let databaseStarting: Promise<void> | null = null;
let stopping = false;
/** SHUTDOWN_GRACE_SECONDS, once the environment has been read (its default before). */
let graceMs = 30_000;

async function main(): Promise<void> {
  const e = parseEnv();
  graceMs = e.SHUTDOWN_GRACE_SECONDS * 1000;
  mkdirSync(e.DATA_DIR, { recursive: true });
  // One launcher per DATA_DIR from its first step to its last, whatever the database: before, two
  // started within the build's minute both passed the checks below (nothing was written or bound
  // yet) and both built and started.
  releaseLauncher = launcherLock(e.DATA_DIR);
  // Another instance on these files or this port is said before anything is built: a build
  // replaces .next, under the running app's feet.
  if (!e.DATABASE_URL) {
    const running = readEmbeddedInfo(e.DATA_DIR);
    if (running) throw new Error(`Another 'npm start' (pid ${running.pid}) is already serving ${e.DATA_DIR}.`);
  }
  await assertPortFree(e.PORT);
  ensureBuild();

  // The embedded database's address is settled before it starts, so the web app (which connects
  // on its first request) boots while the database initialises: a first start takes about a
  // second less.
  let databaseUrl = e.DATABASE_URL;
  let startDatabase = async () => {};
  // A fresh embedded database means a first run: hash the demo user's password meanwhile.
  const fresh = !databaseUrl && !existsSync(path.join(embeddedPaths(e.DATA_DIR).cluster, "PG_VERSION"));
  const demoUser = fresh ? prepareDemoUser() : undefined;
  demoUser?.catch(() => {});
  if (!databaseUrl) {
    const port = e.EMBEDDED_DB_PORT || (await freePort());
    const password = readDbPassword(embeddedPaths(e.DATA_DIR).passwordFile) ?? newDbPassword();
    databaseUrl = embeddedDbUrl(port, password);
    startDatabase = async () => {
      const db = await startAppEmbeddedDb(e.DATA_DIR, { port, password, announce: true });
      embedded = db;
      // A server that dies under the launcher (the OOM killer, a kill, a full disk in recovery)
      // stops it all, saying why: before, nothing was said and the app answered 503 for good.
      void db.exited.then(({ code, signal }) => {
        if (stopping) return;
        console.error(
          `error: the embedded PostgreSQL exited (${signal ?? `code ${code}`}); its log is ` +
            `${embeddedPaths(e.DATA_DIR).logFile}. Stopping; start again with npm start.`,
        );
        void shutdown(1);
      });
    };
  }
  const childEnv = {
    ...process.env,
    DATABASE_URL: databaseUrl,
    AUTH_SECRET: e.AUTH_SECRET,
    PUBLIC_URL: e.PUBLIC_URL,
    DATA_DIR: e.DATA_DIR,
    PORT: String(e.PORT),
    NEXT_TELEMETRY_DISABLED: "1",
    NEXTAUTH_URL: e.PUBLIC_URL,
  };
  // The worker gets only the shared secret of its internal API, never AUTH_SECRET (which signs
  // sessions and URLs): a compromised worker cannot forge a dashboard session.
  const workerEnv: NodeJS.ProcessEnv = { ...childEnv, WORKER_SECRET: workerSecret() };
  delete workerEnv.AUTH_SECRET;
  // A port already taken made the app crash five times over half a minute, then stop everything;
  // or, taken by another instance, its health answered and the banner printed credentials it
  // did not know. Said at once instead (again: the build may have taken a while).
  await assertPortFree(e.PORT);
  supervisor.start("app", appProcessArgs(e.PORT), childEnv);
  const started = startDatabase();
  if (!e.DATABASE_URL)
    databaseStarting = started.then(
      () => void (databaseStarting = null),
      () => void (databaseStarting = null),
    );
  const [demoModel] = await Promise.all([ensureDemoModel(e.DATA_DIR), started]);
  await migrateDatabase(databaseUrl, undefined, (line) => console.log(line));
  const handle = connect(databaseUrl, { max: 1 });
  const demo = await seedDemo(handle.db, { demoModel, demoUser });
  if (!demo && (await repointDemoModel(handle.db, demoModel)))
    console.log(`The demo deployment now serves the tiny model from ${demoModel} (DATA_DIR moved).`);
  // The database's clock (the worker's row is stamped by it): rows older than this are not its.
  const [{ now: launchedAt }] = (await handle.sql`select now()::text as now`) as unknown as [{ now: string }];
  await handle.close();
  if (demo) writeFirstRunFile(e.DATA_DIR, e.PUBLIC_URL, demo);

  // The worker starts once the demo deployment exists: it loads the models of the deployments table.
  const worker = supervisor.start("worker", workerProcessArgs(), workerEnv);

  await waitForHttp(`http://127.0.0.1:${e.PORT}/api/health`);
  await waitForWorker(databaseUrl, () => worker.pid, launchedAt);
  printBanner(e.PUBLIC_URL, e.DATA_DIR, demo, Boolean(e.DATABASE_URL));
}

/**
 * "Running" means the worker has registered and advertised its inference address too: a worker
 * of this launch (the row of one that died before, after a container restart, may have its pid).
 * `pid` is the supervised worker's current one: a worker that died before registering is
 * restarted under another pid (before, the launcher kept waiting for the first and stopped
 * everything after a minute, though the second had registered).
 */
async function waitForWorker(
  databaseUrl: string,
  pid: () => number | undefined,
  since: string,
  timeoutMs = 60_000,
): Promise<void> {
  const handle = connect(databaseUrl, { max: 1 });
  try {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const current = pid();
      const rows =
        current === undefined
          ? []
          : await handle.sql`
        select 1 from workers where pid = ${current} and address is not null and started_at >= ${since}::timestamptz`;
      if (rows.length > 0) return;
      await new Promise((r) => setTimeout(r, 250));
    }
    throw new Error(`The worker did not register within ${timeoutMs / 1000}s.`);
  } finally {
    await handle.close();
  }
}

/** Refuses to start when something listens on `port` already (as the app will: every interface). */
async function assertPortFree(port: number): Promise<void> {
  const probe = net.createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once("error", (err: NodeJS.ErrnoException) =>
      reject(
        err.code === "EADDRINUSE"
          ? new Error(`Port ${port} is in use: stop what listens there, or set PORT to another port.`)
          : err,
      ),
    );
    probe.listen(port, () => probe.close(() => resolve()));
  });
}

async function waitForHttp(url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`The web app did not answer at ${url} within ${timeoutMs / 1000}s.`);
}

/**
 * The demo deployment serves the generated tiny model from DATA_DIR/models/tiny (deterministic,
 * a few seconds to make; generated again only if the folder is gone), so a first run can
 * complete text without downloading anything.
 */
async function ensureDemoModel(dataDir: string): Promise<string> {
  const dir = path.join(dataDir, "models", "tiny");
  if (!existsSync(path.join(dir, "onnx", "model.onnx"))) {
    const { generateTinyModel } = await import("./tiny-model/generate");
    await generateTinyModel(dir);
  }
  return dir;
}

const demoDeploymentUrl = (url: string, demo: DemoCredentials) =>
  demo.deploymentName ? `${url}/deployments/${demo.teamSlug}/${demo.deploymentName}` : null;

function writeFirstRunFile(dataDir: string, url: string, demo: DemoCredentials): void {
  const deployment = demoDeploymentUrl(url, demo);
  const text = [
    `URL:       ${url}`,
    `Sign in:   ${demo.email} / ${demo.password}`,
    `API key:   ${demo.apiKey}`,
    `Model key: ${demo.modelKey}`,
    ...(deployment ? [`Deployment: ${deployment}`] : []),
    "",
  ].join("\n");
  writeFileSync(path.join(dataDir, "first-run.txt"), text, { mode: 0o600 });
}

function printBanner(url: string, dataDir: string, demo: DemoCredentials | null, external: boolean): void {
  const lines = ["", "  LM Platform is running.", "", `  Open:       ${url}`];
  if (demo) {
    lines.push(
      `  Sign in:    ${demo.email} / ${demo.password}`,
      `  API key:    ${demo.apiKey}`,
      `  Model key:  ${demo.modelKey}`,
      ...(demoDeploymentUrl(url, demo) ? [`  Deployment: ${demoDeploymentUrl(url, demo)}`] : []),
      "",
      `  These were created on this first run and are also saved in ${path.join(dataDir, "first-run.txt")}.`,
    );
  } else {
    lines.push(
      `  Sign in:    with your account (the first run's demo credentials are in ${path.join(dataDir, "first-run.txt")})`,
      "  New keys:   npm run cli -- key:create --team <slug> --kind api|model",
    );
  }
  lines.push(
    "",
    `  Try it:     curl -H "Authorization: Bearer ${demo?.apiKey ?? "<API key>"}" ${url}/v1/pipelines/list`,
    ...(demo && demoDeploymentUrl(url, demo)
      ? [
          `              curl -H "Authorization: Bearer ${demo.modelKey}" ${demoDeploymentUrl(url, demo)} -d '{"prompt":"Once upon a time","max_tokens":20}'`,
        ]
      : []),
    ...(external ? ["  Database:   DATABASE_URL"] : embeddedBanner(dataDir)),
    "  Stop:       Ctrl-C",
    "",
  );
  console.log(lines.join("\n"));
}

function embeddedBanner(dataDir: string): string[] {
  const p = embeddedPaths(dataDir);
  return [
    `  Database:   embedded PostgreSQL on 127.0.0.1:${embedded!.port} (user postgres, password in ${p.passwordFile})`,
    `              files in ${p.cluster}, log in ${p.logFile}`,
  ];
}

/**
 * Ctrl-C or SIGTERM: the app and the worker stop taking work and finish what is in flight (up to
 * SHUTDOWN_GRACE_SECONDS), then the database stops.
 */
async function shutdown(code: number): Promise<void> {
  if (stopping) return;
  stopping = true;
  await supervisor.stop(graceMs);
  // Stopped while the database was starting (Ctrl-C during a first start's initdb): before, it
  // was left running, in its process group of its own, until the next start.
  if (databaseStarting) {
    console.error("Waiting for the embedded PostgreSQL to finish starting, to stop it…");
    await databaseStarting;
  }
  await embedded?.stop().catch(() => {});
  releaseLauncher?.();
  process.exit(code);
}

let releaseLauncher: (() => void) | undefined;

/**
 * Takes `DATA_DIR/launcher.lock`, or says who holds it. One whose process is gone is taken over,
 * and so is one not kept fresh for a minute (the holder touches it every 10 s): a container
 * recreated under a new hostname cannot ask the old one's process, which a stop's timeout killed.
 */
function launcherLock(dataDir: string): () => void {
  const file = path.join(dataDir, "launcher.lock");
  for (let tries = 0; tries < 3; tries++) {
    const release = tryLock(file, { beatMs: 10_000 });
    if (release) return release;
    const seen = readLock(file);
    if (seen && !lockAbandoned(seen, { staleMs: 60_000 }))
      throw new Error(`Another 'npm start' (pid ${seen.holder?.pid ?? "?"}) is already running on ${dataDir}.`);
    if (seen) takeOverLock(file, seen);
  }
  throw new Error(`Could not take ${file}.`);
}

process.on("SIGINT", () => void shutdown(0));
process.on("SIGTERM", () => void shutdown(0));
// A closed terminal (an ssh session that dropped): the same orderly stop. Before, the launcher died
// at once, and the database it runs in a process group of its own ran on.
process.on("SIGHUP", () => void shutdown(0));

main().catch(async (err: unknown) => {
  // The reason, not drizzle's "Failed query: …" wrapper (a refused connection, a wrong password).
  console.error(err instanceof EnvError ? `error: ${err.message}` : `error: ${errorCause(err)}`);
  await shutdown(1);
});
