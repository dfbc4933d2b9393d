// llama.cpp for the bench, offline and outside the repository's dependencies: node-llama-cpp
// (pinned by this folder's package.json / package-lock.json) is installed on demand into
// node_modules/.cache/lmp-llamacpp with NODE_LLAMA_CPP_SKIP_DOWNLOAD=true and --omit=optional
// (npm registry only; its prebuilt CPU libraries come in @node-llama-cpp/linux-x64), then
// build.sh compiles llama-bench and llama-batched-bench from the llama.cpp source that package
// ships, against its prebuilt libraries. Everything is reused by later runs.
import { execFileSync, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import path from "node:path";

const HERE = import.meta.dirname;
export const TOOLS_DIR = path.resolve(HERE, "../../../node_modules/.cache/lmp-llamacpp");

export interface LlamaCppTools {
  dir: string;
  llamaBench: string;
  /** null when it did not build: `batchedBenchError` says why. */
  batchedBench: string | null;
  batchedBenchError: string | null;
  helper: string;
}

/**
 * The environment without `npm run`'s npm_* variables: npm_config_local_prefix (the repository)
 * would otherwise make the nested `npm ci` act on the repository's own dependencies.
 */
const cleanEnv = () =>
  Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k))) as NodeJS.ProcessEnv;

const same = (a: string, b: string) => existsSync(b) && readFileSync(a).equals(readFileSync(b));

export function ensureTools(log: (s: string) => void): LlamaCppTools {
  const dir = TOOLS_DIR;
  mkdirSync(dir, { recursive: true });
  const lockChanged = !same(path.join(HERE, "package-lock.json"), path.join(dir, "package-lock.json"));
  if (lockChanged || !existsSync(path.join(dir, "node_modules/node-llama-cpp/package.json"))) {
    log(`installing node-llama-cpp into ${dir} (npm registry; prebuilt CPU binaries, nothing else downloaded) ...`);
    for (const f of ["package.json", "package-lock.json"]) copyFileSync(path.join(HERE, f), path.join(dir, f));
    // npm install, not npm ci: the lock was written with --omit=optional, so it lacks the other
    // platforms' optional packages that npm ci insists on; install keeps every locked version.
    execFileSync("npm", ["install", "--omit=optional", "--no-save", "--no-audit", "--no-fund", "--loglevel=error"], {
      cwd: dir,
      stdio: ["ignore", "inherit", "inherit"],
      env: { ...cleanEnv(), NODE_LLAMA_CPP_SKIP_DOWNLOAD: "true" },
    });
  }
  copyFileSync(path.join(HERE, "helper.mjs"), path.join(dir, "helper.mjs"));
  const bin = path.join(dir, "bin");
  const llamaBench = path.join(bin, "llama-bench");
  const batched = path.join(bin, "llama-batched-bench");
  let batchedBenchError: string | null = null;
  if (!existsSync(llamaBench) || !existsSync(batched)) {
    log("compiling llama-bench and llama-batched-bench (g++, from node-llama-cpp's bundled llama.cpp source) ...");
    const r = spawnSync("bash", [path.join(HERE, "build.sh"), dir], { encoding: "utf8" });
    process.stdout.write(r.stdout);
    if (!existsSync(llamaBench)) throw new Error(`llama-bench did not build (exit ${r.status}):\n${r.stderr}`);
    if (r.status !== 0) batchedBenchError = r.stderr.trim().split("\n").slice(-6).join("\n");
  }
  return {
    dir,
    llamaBench,
    batchedBench: existsSync(batched) ? batched : null,
    batchedBenchError: existsSync(batched) ? null : (batchedBenchError ?? "not built"),
    helper: path.join(dir, "helper.mjs"),
  };
}
