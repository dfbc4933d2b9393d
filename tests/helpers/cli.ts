// The project's CLI (scripts/cli.ts) in a child process, against the suite's database and app.
import { spawn } from "node:child_process";
import path from "node:path";
import { inject } from "vitest";
import { baseUrl } from "./context";

const root = path.resolve(import.meta.dirname, "../..");

/**
 * Runs the CLI and awaits it without blocking this process: a blocked event loop (`spawnSync`)
 * misses the app closing an idle kept-alive connection, and the next fetch then fails on it
 * ("other side closed"). `env` adds variables to the suite's own.
 */
export async function runCli(env: Record<string, string>, ...args: string[]) {
  const child = spawn(process.execPath, ["--import", "tsx", path.join(root, "scripts/cli.ts"), ...args], {
    cwd: root,
    env: {
      ...process.env,
      ...env,
      DATABASE_URL: inject("databaseUrl"),
      AUTH_SECRET: inject("authSecret"),
      DATA_DIR: inject("dataDir"),
      PUBLIC_URL: baseUrl,
    },
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
  child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", resolve);
  });
  return { code, stdout, stderr, lastLine: stdout.trim().split("\n").at(-1) ?? "" };
}
