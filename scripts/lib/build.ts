import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "../..");
const SOURCES = [
  "app",
  "components",
  "lib",
  "public",
  "pages",
  "proxy.ts",
  // The migration journal: the health check's expected count is compiled in (lib/services/health.ts).
  "drizzle/meta/_journal.json",
  "next.config.mjs",
  "package-lock.json",
  "tsconfig.json",
  "postcss.config.mjs",
];

function newestMtime(p: string): number {
  if (!existsSync(p)) return 0;
  const st = statSync(p);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const entry of readdirSync(p)) newest = Math.max(newest, newestMtime(path.join(p, entry)));
  return newest;
}

/** True when there is no production build, or a source file changed since it was made. */
export function buildIsStale(): boolean {
  const buildId = path.join(root, process.env.NEXT_DIST_DIR || ".next", "BUILD_ID");
  if (!existsSync(buildId)) return true;
  const built = statSync(buildId).mtimeMs;
  return SOURCES.some((s) => newestMtime(path.join(root, s)) > built);
}

/** Runs `next build` (output shown) when the build is missing or stale. */
export function ensureBuild(options: { force?: boolean } = {}): void {
  if (!options.force && !buildIsStale()) return;
  console.log("Building the web app (next build)…");
  const result = spawnSync(process.execPath, [path.join(root, "node_modules/next/dist/bin/next"), "build"], {
    cwd: root,
    stdio: "inherit",
    env: { ...process.env, NEXT_TELEMETRY_DISABLED: "1" },
  });
  if (result.status !== 0) throw new Error(`next build failed (exit ${result.status})`);
}

export const repoRoot = root;
