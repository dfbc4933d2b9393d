// The hub cache (DATA_DIR/hub) given back: a repository that no deployment and no dataset being
// packaged names any more, for `keepMs`, is removed, and so is a snapshot of a named one that no
// revision points to any more (its branch moved on). Before, nothing was ever removed: a team
// deploying, deleting and deploying other large models filled the disk that the embedded database
// shares.
import { existsSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import path from "node:path";
import { listDir, parseHubId, readRef, repoCacheDir } from "./hub-config";

/** Touched whenever the repository is wanted: how long it has not been is read from it. */
const WANTED_MARK = ".wanted";

export interface SweepResult {
  /** Repositories and snapshots removed. */
  removed: string[];
  bytes: number;
}

/**
 * `models`: every model id in use (deployments, datasets' tokenizers); ids that are not hub ids
 * (local folders) are ignored. A repository or snapshot with a download in progress (a `.lock` or
 * `.incomplete` file touched within `keepMs`) is left alone.
 */
export function sweepHubCache(
  cacheDir: string,
  models: Iterable<string>,
  keepMs: number,
  now = Date.now(),
): SweepResult {
  const result: SweepResult = { removed: [], bytes: 0 };
  const wanted = new Map<string, Set<string>>(); // repository folder → revisions named
  for (const id of models) {
    const parsed = parseHubId(id);
    if (!parsed) continue;
    const dir = repoCacheDir(cacheDir, parsed.repo);
    wanted.set(dir, (wanted.get(dir) ?? new Set()).add(parsed.revision));
  }
  const remove = (dir: string) => {
    result.bytes += sizeOf(dir);
    rmSync(dir, { recursive: true, force: true });
    result.removed.push(path.relative(cacheDir, dir));
  };
  for (const name of listDir(cacheDir)) {
    if (!name.startsWith("models--")) continue;
    const dir = path.join(cacheDir, name);
    const revisions = wanted.get(dir);
    if (revisions) {
      markWanted(dir, now);
      // Snapshots no revision in use points to (a branch that moved on, a deployment of
      // org/m@v1 deleted while org/m stays): the refs of the revisions named now are kept.
      const pointed = new Set<string | null>();
      for (const ref of listDir(path.join(dir, "refs"))) {
        const file = path.join(dir, "refs", ref);
        if (revisions.has(decoded(ref))) pointed.add(readRef(file));
        else if (statMs(file) < now - keepMs) rmSync(file, { force: true });
      }
      for (const sha of listDir(path.join(dir, "snapshots"))) {
        const snapshot = path.join(dir, "snapshots", sha);
        if (!pointed.has(sha) && newestChange(snapshot) < now - keepMs) remove(snapshot);
      }
      continue;
    }
    if (Math.max(statMs(path.join(dir, WANTED_MARK)), newestChange(dir)) < now - keepMs) remove(dir);
  }
  return result;
}

function markWanted(dir: string, now: number) {
  const mark = path.join(dir, WANTED_MARK);
  try {
    if (!existsSync(mark)) writeFileSync(mark, "");
    utimesSync(mark, now / 1000, now / 1000);
  } catch {
    // a read-only cache: nothing is swept from it either way
  }
}

const decoded = (name: string) => {
  try {
    return decodeURIComponent(name);
  } catch {
    return name;
  }
};

const statMs = (file: string) => statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? 0;

/**
 * The latest modification of a file in a folder (folders' own times change as entries come and
 * go, a sweep's included): when it was last downloaded into, or when a download in progress (its
 * lock, touched every 5 s, its partial file) last moved.
 */
function newestChange(dir: string): number {
  let newest = 0;
  for (const entry of listDir(dir)) {
    if (entry === WANTED_MARK) continue;
    const p = path.join(dir, entry);
    const st = statSync(p, { throwIfNoEntry: false });
    if (!st) continue;
    newest = Math.max(newest, st.isDirectory() ? newestChange(p) : st.mtimeMs);
  }
  return newest;
}

function sizeOf(p: string): number {
  const st = statSync(p, { throwIfNoEntry: false });
  if (!st) return 0;
  if (!st.isDirectory()) return st.size;
  return listDir(p).reduce((a, e) => a + sizeOf(path.join(p, e)), 0);
}
