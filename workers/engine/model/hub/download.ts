// Hub ids: the files a model needs for one dtype, downloaded into the cache (DATA_DIR/hub) with
// progress, and reused as they are on the next start (no request at all) or when offline. The
// cache is kept by commit (models--org--name/snapshots/<commit>, refs/<revision> naming it), so
// the files of one load always come from one commit.
import { existsSync, readFileSync, statSync } from "node:fs";
import { randomUUID } from "node:crypto";
import { copyFile, link, mkdir, rename, statfs, utimes, writeFile } from "node:fs/promises";
import path from "node:path";
import { loadError } from "../../errors";
import type { Dtype, DtypeChoice } from "../dtypes";
import { chooseGraph, REQUIRED_FILES } from "../model-folder";
import type { FileProgress, LoadProgress } from "../progress";
import { downloadFile } from "./download-file";
import { listRepoFiles, resolveCommit, type RepoFile } from "./hub-client";
import {
  hubOptionsFromEnv,
  legacySnapshotDir,
  listDir,
  parseHubId,
  readRef,
  refFile,
  repoCacheDir,
  snapshotDir,
  type HubOptions,
} from "./hub-config";

const OPTIONAL_FILES = [
  "generation_config.json",
  "special_tokens_map.json",
  "chat_template.jinja",
  "chat_template.json",
];
const PROGRESS_EVERY_MS = 100;

export interface DownloadOptions {
  dtype: DtypeChoice;
  /** Only what the tokenizer and chat template need (no graph, no weights): counting tokens. */
  tokenizerOnly?: boolean;
  onProgress?: (p: LoadProgress) => void;
  signal?: AbortSignal;
  hub?: Partial<HubOptions>;
}

interface Marker {
  dtype: Dtype;
  files: string[];
  /** Each file's digest as the listing gave it ("sha256:…", "git-sha1:…"): a later commit with the same file reuses it. */
  digests?: Record<string, string>;
}

const digestOf = (f: RepoFile) => (f.digest ? `${f.digest.algorithm}:${f.digest.hex}` : null);

/** Downloads (or finds in the cache) what `id` needs for `dtype`; returns the local folder and dtype. */
export async function downloadModel(id: string, opts: DownloadOptions): Promise<{ dir: string; dtype: Dtype }> {
  const hub = { ...hubOptionsFromEnv(), ...opts.hub };
  const parsed = parseHubId(id);
  if (!parsed)
    throw loadError(
      "not_found",
      `model folder not found: ${path.resolve(id)} (and ${id} is not a hub id like org/name)`,
    );
  const { repo, revision } = parsed;
  const markerName = `.complete-${opts.tokenizerOnly ? "tokenizer" : opts.dtype}.json`;
  // This dtype's download; for an explicit dtype, also an `auto` download that chose it; for the
  // tokenizer, any download (each holds the tokenizer's files).
  const cachedIn = (dir: string) =>
    readMarker(path.join(dir, markerName), dir) ??
    (opts.tokenizerOnly
      ? anyDownload(dir)
      : opts.dtype !== "auto"
        ? (completeMarkers(dir).find((m) => m.dtype === opts.dtype) ?? null)
        : null);
  // Cached: the commit the revision named when it was downloaded (no request), or a cache from
  // before snapshots by commit.
  const pinned = readRef(refFile(hub.cacheDir, repo, revision));
  for (const dir of [
    ...(pinned ? [snapshotDir(hub.cacheDir, repo, pinned)] : []),
    legacySnapshotDir(hub.cacheDir, repo, revision),
  ]) {
    const cached = cachedIn(dir);
    if (cached) return { dir, dtype: cached.dtype };
  }
  if (hub.offline) {
    // Offline, a complete download in another snapshot of the repository (the branch moved on
    // after it, and a later download of another dtype pointed the ref at the new commit) serves.
    const snapshots = path.join(repoCacheDir(hub.cacheDir, repo), "snapshots");
    const others = listDir(snapshots)
      .map((name) => path.join(snapshots, name))
      .sort(
        (a, b) =>
          (statSync(b, { throwIfNoEntry: false })?.mtimeMs ?? 0) -
          (statSync(a, { throwIfNoEntry: false })?.mtimeMs ?? 0),
      );
    for (const dir of others) {
      const cached = cachedIn(dir);
      if (cached) return { dir, dtype: cached.dtype };
    }
    throw loadError(
      "offline",
      `HF_HUB_OFFLINE is set and model ${id} (dtype ${opts.dtype}) is not in the cache ` +
        `(${repoCacheDir(hub.cacheDir, repo)}); unset HF_HUB_OFFLINE to download it`,
    );
  }

  opts.onProgress?.({ state: "resolving", id });
  // Every file comes from the commit the revision names now: a branch that moves on between two
  // downloads (a second dtype, a resumed one) never mixes the files of two commits.
  const commit = await resolveCommit(hub, repo, revision, opts.signal);
  const dir = snapshotDir(hub.cacheDir, repo, commit);
  const done = cachedIn(dir);
  if (done) {
    await writeRef(refFile(hub.cacheDir, repo, revision), commit);
    return { dir, dtype: done.dtype };
  }
  const listing = await listRepoFiles(hub, repo, commit, opts.signal);
  const byPath = new Map(listing.map((f) => [f.path, f]));
  const missing = REQUIRED_FILES.filter((f) => !byPath.has(f));
  if (missing.length)
    throw loadError(
      "invalid_model",
      `model ${id} on ${hub.endpoint} has no ${missing.join(", ")}: not a transformers.js model repository`,
    );
  const reusable = reusableFiles(repoCacheDir(hub.cacheDir, repo), dir);
  const fetchOne = async (file: string, onBytes: (n: number) => void) => {
    const f = byPath.get(file)!;
    if (await reuse(reusable, f, path.join(dir, file))) return onBytes(f.size);
    await downloadFile(hub, repo, commit, f, dir, { signal: opts.signal, onBytes });
  };
  // config.json first: `auto` may follow its transformers.js_config.dtype.
  await fetchOne("config.json", () => {});
  const config = readConfig(path.join(dir, "config.json"), id);
  const choice = opts.tokenizerOnly
    ? { dtype: "fp32" as const, graph: null, data: [] }
    : chooseGraph(id, [...byPath.keys()], opts.dtype, config);
  const wanted = [
    ...REQUIRED_FILES,
    ...OPTIONAL_FILES.filter((f) => byPath.has(f)),
    ...(choice.graph ? [choice.graph] : []),
    ...choice.data,
  ];

  const release = await claimRoom(
    hub,
    dir,
    id,
    choice.dtype,
    bytesToFetch(
      wanted.map((f) => byPath.get(f)!),
      dir,
      reusable,
    ),
  );
  try {
    const progress: FileProgress[] = wanted.map((f) => ({ file: f, done: 0, total: byPath.get(f)!.size }));
    const total = progress.reduce((a, p) => a + p.total, 0);
    let last = 0;
    const report = (p: FileProgress, force = false) => {
      const now = Date.now();
      if (!opts.onProgress || (!force && now - last < PROGRESS_EVERY_MS)) return;
      last = now;
      const done = progress.reduce((a, f) => a + f.done, 0);
      opts.onProgress({
        state: "downloading",
        id,
        dtype: choice.dtype,
        file: { ...p },
        files: progress.map((f) => ({ ...f })),
        done,
        total,
      });
    };
    for (const p of progress) {
      await fetchOne(p.file, (n) => {
        p.done = n;
        report(p);
      });
      report(p, true);
    }
    const digests = Object.fromEntries(
      wanted.flatMap((f) => {
        const digest = digestOf(byPath.get(f)!);
        return digest ? [[f, digest]] : [];
      }),
    );
    const marker: Marker = { dtype: choice.dtype, files: wanted, digests };
    await writeFile(path.join(dir, markerName), JSON.stringify(marker));
    await writeRef(refFile(hub.cacheDir, repo, revision), commit);
    return { dir, dtype: choice.dtype };
  } finally {
    release();
  }
}

/** The downloaded config.json; one that is not JSON fails `invalid_model`, naming the file. */
function readConfig(file: string, id: string): Record<string, unknown> {
  try {
    const config = JSON.parse(readFileSync(file, "utf8")) as unknown;
    if (config && typeof config === "object" && !Array.isArray(config)) return config as Record<string, unknown>;
    throw new Error("not a JSON object");
  } catch (e) {
    throw loadError("invalid_model", `model ${id}: config.json is not valid JSON (${(e as Error).message})`);
  }
}

const DEFAULT_MIN_FREE_BYTES = 1024 ** 3;
const gib = (n: number) => `${(n / 1024 ** 3).toFixed(n < 10 * 1024 ** 3 ? 2 : 1)} GiB`;

/** What is left to download of `files`: neither in the snapshot, nor linkable from another, less what a partial file holds. */
function bytesToFetch(files: RepoFile[], dir: string, reusable: Map<string, string>): number {
  let bytes = 0;
  for (const f of files) {
    const target = path.join(dir, f.path);
    if (statSync(target, { throwIfNoEntry: false })?.size === f.size) continue;
    const digest = digestOf(f);
    if (digest && reusable.has(digest)) continue;
    bytes += Math.max(0, f.size - (statSync(`${target}.incomplete`, { throwIfNoEntry: false })?.size ?? 0));
  }
  return bytes;
}

/**
 * A download that would leave less than `minFreeBytes` on the cache's disk is refused before it
 * starts (`disk_full`, with the figures): filling the disk would fail the download anyway, after
 * hours, and take the embedded database on the same disk down with it.
 */
/** Bytes that downloads under way in this process have yet to write, by the cache's folder. */
const promised = new Map<string, number>();

/**
 * assertRoom, counting what the downloads already under way in this process will still write as
 * taken (two models that each fit alone do not both start on a disk that holds one). Returns the
 * release of this download's claim.
 */
export async function claimRoom(
  hub: HubOptions,
  dir: string,
  id: string,
  dtype: Dtype,
  needed: number,
): Promise<() => void> {
  await assertRoom(hub, dir, id, dtype, needed, promised.get(hub.cacheDir) ?? 0);
  promised.set(hub.cacheDir, (promised.get(hub.cacheDir) ?? 0) + needed);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    const left = (promised.get(hub.cacheDir) ?? needed) - needed;
    if (left > 0) promised.set(hub.cacheDir, left);
    else promised.delete(hub.cacheDir);
  };
}

async function assertRoom(
  hub: HubOptions,
  dir: string,
  id: string,
  dtype: Dtype,
  needed: number,
  others: number,
): Promise<void> {
  if (needed === 0) return;
  let where = dir;
  while (!existsSync(where) && path.dirname(where) !== where) where = path.dirname(where);
  const fs = await statfs(where);
  const free = fs.bavail * fs.bsize;
  const keep = hub.minFreeBytes ?? DEFAULT_MIN_FREE_BYTES;
  if (needed + others + keep <= free) return;
  throw loadError(
    "disk_full",
    `model ${id} (${dtype}) needs ${gib(needed)} more on the disk of ${hub.cacheDir}, which has ${gib(free)} free` +
      (others > 0 ? ` (${gib(others)} of it promised to downloads under way)` : "") +
      ", " +
      `and ${gib(keep)} are kept free for the database and the system (HUB_MIN_FREE_BYTES): free some space, ` +
      `or deploy a smaller dtype`,
  );
}

/** Any finished download of the model (each holds the tokenizer's files): a tokenizer needs no other. */
const anyDownload = (dir: string): Marker | null => completeMarkers(dir)[0] ?? null;

/** The finished downloads (of each dtype) in a snapshot. */
const completeMarkers = (dir: string): Marker[] =>
  listDir(dir).flatMap((name) => {
    const m = /^\.complete-.+\.json$/.test(name) ? readMarker(path.join(dir, name), dir) : null;
    return m ? [m] : [];
  });

/** A finished download of this dtype: every file it listed is still there. */
function readMarker(file: string, dir: string): Marker | null {
  try {
    const m = JSON.parse(readFileSync(file, "utf8")) as Marker;
    return m.files.every((f) => existsSync(path.join(dir, f))) ? m : null;
  } catch {
    return null;
  }
}

async function writeRef(file: string, commit: string) {
  await mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.${randomUUID()}.tmp`;
  await writeFile(tmp, commit);
  await rename(tmp, file);
}

/**
 * Complete files of the repository's other snapshots, by digest (from their markers; a cache from
 * before snapshots by commit has no digests in its markers).
 */
function reusableFiles(repoDir: string, except: string): Map<string, string> {
  const found = new Map<string, string>();
  const snapshots = path.join(repoDir, "snapshots");
  for (const dir of listDir(snapshots).map((d) => path.join(snapshots, d))) {
    if (dir === except) continue;
    for (const m of completeMarkers(dir))
      for (const [file, digest] of Object.entries(m.digests ?? {})) found.set(digest, path.join(dir, file));
  }
  return found;
}

/**
 * A file another commit of the repository has with the same digest (a new commit that changed
 * the README, not the weights) is linked into this snapshot, not downloaded again. Snapshot files
 * are never written in place (a download renames its finished file), so a hard link is safe.
 */
async function reuse(reusable: Map<string, string>, file: RepoFile, target: string): Promise<boolean> {
  const digest = digestOf(file);
  const source = digest ? reusable.get(digest) : undefined;
  if (!source || statSync(source, { throwIfNoEntry: false })?.size !== file.size) return false;
  if (existsSync(target) && statSync(target).size === file.size) return true;
  await mkdir(path.dirname(target), { recursive: true });
  const tmp = `${target}.${randomUUID()}.link`; // two loads of one commit may link a file at once
  try {
    await link(source, tmp);
  } catch {
    await copyFile(source, tmp); // another file system, or one without hard links
  }
  // Its time is now: the cache sweep reads a snapshot's age from its files.
  const now = new Date();
  await utimes(tmp, now, now);
  await rename(tmp, target);
  return true;
}
