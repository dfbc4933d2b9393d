// Hub ids: the files a model needs for one dtype, downloaded into the cache (DATA_DIR/hub) with
// progress, and reused as they are on the next start (no request at all) or when offline.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { loadError } from "../../errors";
import type { Dtype, DtypeChoice } from "../dtypes";
import { chooseGraph, REQUIRED_FILES } from "../model-folder";
import type { FileProgress, LoadProgress } from "../progress";
import { downloadFile } from "./download-file";
import { listRepoFiles } from "./hub-client";
import { hubOptionsFromEnv, parseHubId, snapshotDir, type HubOptions } from "./hub-config";

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
}

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
  const dir = snapshotDir(hub.cacheDir, repo, revision);
  const markerFile = path.join(dir, `.complete-${opts.tokenizerOnly ? "tokenizer" : opts.dtype}.json`);
  const cached = readMarker(markerFile, dir) ?? (opts.tokenizerOnly ? anyDownload(dir) : null);
  if (cached) return { dir, dtype: cached.dtype };
  if (hub.offline)
    throw loadError(
      "offline",
      `HF_HUB_OFFLINE is set and model ${id} (dtype ${opts.dtype}) is not in the cache (${dir}); ` +
        `unset HF_HUB_OFFLINE to download it`,
    );

  opts.onProgress?.({ state: "resolving", id });
  const listing = await listRepoFiles(hub, repo, revision, opts.signal);
  const byPath = new Map(listing.map((f) => [f.path, f]));
  const missing = REQUIRED_FILES.filter((f) => !byPath.has(f));
  if (missing.length)
    throw loadError(
      "invalid_model",
      `model ${id} on ${hub.endpoint} has no ${missing.join(", ")}: not a transformers.js model repository`,
    );
  const fetchOne = (file: string, onBytes: (n: number) => void) =>
    downloadFile(hub, repo, revision, byPath.get(file)!, dir, { signal: opts.signal, onBytes });
  // config.json first: `auto` may follow its transformers.js_config.dtype.
  await fetchOne("config.json", () => {});
  const config = JSON.parse(readFileSync(path.join(dir, "config.json"), "utf8")) as Record<string, unknown>;
  const choice = opts.tokenizerOnly
    ? { dtype: "fp32" as const, graph: null, data: [] }
    : chooseGraph(id, [...byPath.keys()], opts.dtype, config);
  const wanted = [
    ...REQUIRED_FILES,
    ...OPTIONAL_FILES.filter((f) => byPath.has(f)),
    ...(choice.graph ? [choice.graph] : []),
    ...choice.data,
  ];

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
  const marker: Marker = { dtype: choice.dtype, files: wanted };
  await writeFile(markerFile, JSON.stringify(marker));
  return { dir, dtype: choice.dtype };
}

/** Any finished download of the model (each holds the tokenizer's files): a tokenizer needs no other. */
function anyDownload(dir: string): Marker | null {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return null;
  }
  for (const name of names) {
    const m = /^\.complete-.+\.json$/.test(name) ? readMarker(path.join(dir, name), dir) : null;
    if (m) return m;
  }
  return null;
}

/** A finished download of this dtype: every file it listed is still there. */
function readMarker(file: string, dir: string): Marker | null {
  try {
    const m = JSON.parse(readFileSync(file, "utf8")) as Marker;
    return m.files.every((f) => existsSync(path.join(dir, f))) ? m : null;
  } catch {
    return null;
  }
}
