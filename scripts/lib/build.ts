import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { lockAbandoned, readLock, takeOverLock, tryLock } from "../../lib/pid-lock";

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

/**
 * What the sources are now: every file's path, size and modification time. A build is current
 * when the marker written after it succeeded holds the same: an upgrade unpacked from an archive
 * (older dates than the build) changes it as well as an edit does.
 */
function sourcesFingerprint(root: string): string {
  const hash = createHash("sha256");
  const walk = (p: string) => {
    const st = statSync(p, { throwIfNoEntry: false });
    if (!st) return;
    if (!st.isDirectory()) return void hash.update(`${path.relative(root, p)}\0${st.size}\0${st.mtimeMs}\n`);
    for (const entry of readdirSync(p).sort()) walk(path.join(p, entry));
  };
  for (const s of SOURCES) walk(path.join(root, s));
  return hash.digest("hex");
}

const distDir = (root: string) => path.join(root, process.env.NEXT_DIST_DIR || ".next");
/** Written once `next build` has exited 0; it writes BUILD_ID long before it is done. */
const markerFile = (root: string) => path.join(distDir(root), "lmp-build.json");

/**
 * True when there is no finished production build, or a source file changed since it was made.
 * Before, BUILD_ID alone said "built": Next writes it midway, so a build stopped after it (Ctrl-C,
 * a full disk) was taken for a whole one, and the app then failed to start, every time.
 */
export function buildIsStale(project = root): boolean {
  if (!existsSync(path.join(distDir(project), "BUILD_ID"))) return true;
  try {
    const marker = JSON.parse(readFileSync(markerFile(project), "utf8")) as { sources?: string };
    return marker.sources !== sourcesFingerprint(project);
  } catch {
    return true;
  }
}

/** Builds with `build` (true when it succeeded), then records the sources it was made from. */
export function buildWith(build: () => boolean, project = root): void {
  const sources = sourcesFingerprint(project); // as built: an edit during the build makes it stale
  rmSync(markerFile(project), { force: true });
  if (!build()) return;
  writeFileSync(markerFile(project), JSON.stringify({ sources, builtAt: new Date().toISOString() }));
}

/**
 * Runs `next build` (output shown) when the build is missing, unfinished or stale. One build of a
 * checkout at a time (`.next-build.lock`): a second `npm start` (or test run) meanwhile waits for
 * it, then uses it. Before, both built into the same `.next` at once, and a mix of the two could
 * be marked as a finished build.
 */
export function ensureBuild(options: { force?: boolean } = {}): void {
  if (!options.force && !buildIsStale()) return;
  const release = waitForBuildLock(lockFile(root));
  try {
    if (!options.force && !buildIsStale()) return; // the build waited for was this one
    console.log("Building the web app (next build)…");
    buildWith(() => {
      const result = spawnSync(process.execPath, [path.join(root, "node_modules/next/dist/bin/next"), "build"], {
        cwd: root,
        stdio: "inherit",
        env: { ...process.env, NEXT_TELEMETRY_DISABLED: "1" },
      });
      if (result.status !== 0) throw new Error(`next build failed (exit ${result.status ?? result.signal})`);
      return true;
    });
  } finally {
    release();
  }
}

const lockFile = (project: string) => path.join(project, ".next-build.lock");

/** Takes the build lock, waiting while a live process holds it (an abandoned one is taken over). */
export function waitForBuildLock(file: string, pollMs = 500): () => void {
  let said = false;
  for (;;) {
    const release = tryLock(file);
    if (release) return release;
    const seen = readLock(file);
    if (seen && lockAbandoned(seen)) {
      takeOverLock(file, seen);
      continue;
    }
    if (!said) console.log(`Waiting for another build of the web app (pid ${seen?.holder?.pid ?? "?"}) to finish…`);
    said = true;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, pollMs);
  }
}

export const repoRoot = root;
