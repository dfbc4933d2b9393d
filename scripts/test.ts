// `npm test`: builds the app if needed, then runs every test: unit, integration on the embedded
// database, integration on a real Postgres (TEST_DATABASE_URL, else a local server on
// 127.0.0.1:5432 when one answers), and the browser tests when there are any.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { Socket } from "node:net";
import path from "node:path";
import { ensureBuild, repoRoot } from "./lib/build";

function reachable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = new Socket();
    s.setTimeout(1000);
    s.once("connect", () => (s.destroy(), resolve(true)));
    s.once("error", () => resolve(false));
    s.once("timeout", () => (s.destroy(), resolve(false)));
    s.connect(port, host);
  });
}

const env: NodeJS.ProcessEnv = { ...process.env, NEXT_TELEMETRY_DISABLED: "1" };
if (!env.TEST_DATABASE_URL && (await reachable("127.0.0.1", 5432))) {
  env.TEST_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/postgres";
}
if (!env.TEST_DATABASE_URL) {
  console.warn(
    "\n[test] No TEST_DATABASE_URL and no Postgres on 127.0.0.1:5432: running on the embedded database only.\n",
  );
}

const bin = (name: string) => path.join(repoRoot, "node_modules/.bin", name);
const run = (cmd: string, args: string[]) => spawnSync(cmd, args, { cwd: repoRoot, env, stdio: "inherit" }).status ?? 1;

const args = process.argv.slice(2);
// Static checks first (fast, and a type error should not wait for the slow suites).
let status = 0;
if (args.length === 0) {
  for (const [cmd, cmdArgs] of [
    [bin("tsc"), ["--noEmit", "-p", "."]],
    [bin("eslint"), ["."]],
    [bin("prettier"), ["--check", "--log-level", "warn", "."]],
    [bin("drizzle-kit"), ["check"]],
  ] as const) {
    console.log(`\n[test] ${path.basename(cmd)} ${cmdArgs.join(" ")}`);
    status = run(cmd, [...cmdArgs]);
    if (status !== 0) process.exit(status);
  }
}
ensureBuild();
status = run(bin("vitest"), ["run", ...args]);
const e2eDir = path.join(repoRoot, "e2e");
if (
  status === 0 &&
  process.argv.length <= 2 &&
  existsSync(e2eDir) &&
  readdirSync(e2eDir).some((f) => f.endsWith(".spec.ts"))
) {
  status = run(bin("playwright"), ["test"]);
}
process.exit(status);
