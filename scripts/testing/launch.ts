// `npm start` as a user runs it, for the launcher's tests.
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

export const repoRoot = path.resolve(import.meta.dirname, "../..");

/** A fresh DATA_DIR the embedded PostgreSQL can use (as root it runs as another user; mkdtemp makes 0700). */
export function freshDataDir(label: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), `lmp-${label}-`));
  chmodSync(dir, 0o755);
  return dir;
}

export type Launch = { child: ChildProcess; output: () => string };

/** Starts the launcher on `dataDir` (embedded database); resolves once it prints "Stop:". */
export async function launch(dataDir: string, port: number, env: Record<string, string> = {}): Promise<Launch> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, PORT: String(port), ...env };
  delete childEnv.DATABASE_URL;
  delete childEnv.PUBLIC_URL;
  const child = spawn(process.execPath, ["--import", "tsx", path.join(repoRoot, "scripts/start.ts")], {
    cwd: repoRoot,
    env: childEnv,
  });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const deadline = Date.now() + 90_000;
  while (!out.includes("Stop:")) {
    if (child.exitCode !== null) throw new Error(`npm start exited early:\n${out}`);
    if (Date.now() > deadline) throw new Error(`npm start did not come up:\n${out}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return { child, output: () => out };
}

/** Ctrl-C; resolves with the exit code. */
export async function stop(l: Launch): Promise<number | null> {
  if (l.child.exitCode !== null) return l.child.exitCode;
  const exited = new Promise<number | null>((resolve) => l.child.once("exit", (code) => resolve(code)));
  l.child.kill("SIGINT");
  return exited;
}

/** The embedded database's URL while `npm start` runs on `dataDir`. */
export const embeddedUrl = (dataDir: string) =>
  (JSON.parse(readFileSync(path.join(dataDir, "embedded-db.json"), "utf8")) as { url: string }).url;

export const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
