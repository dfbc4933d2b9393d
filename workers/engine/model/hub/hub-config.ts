// Hub settings from the environment (documented in docs/api.md, "Configuration"):
//   HF_ENDPOINT     the hub or a mirror serving the same API (default https://huggingface.co)
//   HF_TOKEN        bearer token, sent to HF_ENDPOINT's origin only (never across a redirect)
//   HF_HUB_OFFLINE  1/true/yes/on: never download; use what the cache holds
//   DATA_DIR        downloads are cached under DATA_DIR/hub (default ./.data/hub)
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { isHubId } from "@/lib/contracts/models";

export interface HubOptions {
  endpoint: string;
  token: string | null;
  offline: boolean;
  cacheDir: string;
  /** A download that sends nothing for this long is dropped and resumed (default 60 s). */
  stallMs?: number;
  /**
   * Bytes a download leaves free on the cache's disk (HUB_MIN_FREE_BYTES, default 1 GiB): the
   * embedded database and the logs often share it.
   */
  minFreeBytes?: number;
}

const truthy = (v: string | undefined) => ["1", "true", "yes", "on"].includes((v ?? "").trim().toLowerCase());

export function hubOptionsFromEnv(e: NodeJS.ProcessEnv = process.env): HubOptions {
  const endpoint = (e.HF_ENDPOINT?.trim() || "https://huggingface.co").replace(/\/+$/, "");
  return {
    endpoint,
    token: e.HF_TOKEN?.trim() || null,
    offline: truthy(e.HF_HUB_OFFLINE),
    cacheDir: path.resolve(e.DATA_DIR?.trim() || "./.data", "hub"),
    ...(e.HUB_MIN_FREE_BYTES?.trim() && Number.isFinite(Number(e.HUB_MIN_FREE_BYTES))
      ? { minFreeBytes: Number(e.HUB_MIN_FREE_BYTES) }
      : {}),
  };
}

export function parseHubId(spec: string): { repo: string; revision: string } | null {
  if (!isHubId(spec)) return null;
  const [repo, revision = "main"] = spec.split("@");
  return { repo, revision };
}

/** Everything cached of one repository: <cacheDir>/models--org--name. */
export const repoCacheDir = (cacheDir: string, repo: string) =>
  path.join(cacheDir, `models--${repo.replace("/", "--")}`);

/**
 * Where one commit of a repository is cached: <cacheDir>/models--org--name/snapshots/<commit>. A
 * snapshot holds the files of that commit only, so a branch that moves never mixes two commits.
 */
export const snapshotDir = (cacheDir: string, repo: string, commit: string) =>
  path.join(repoCacheDir(cacheDir, repo), "snapshots", commit);

/** The commit a revision (branch, tag) named when it was last downloaded: models--org--name/refs/<revision>. */
export const refFile = (cacheDir: string, repo: string, revision: string) =>
  path.join(repoCacheDir(cacheDir, repo), "refs", encodeURIComponent(revision));

/** Before snapshots by commit, a revision's files went to models--org--name/<revision>: still read. */
export const legacySnapshotDir = (cacheDir: string, repo: string, revision: string) =>
  path.join(repoCacheDir(cacheDir, repo), encodeURIComponent(revision));

/** A folder's entries, or none when it is not there (a cache being made, or swept). */
export function listDir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** The commit a ref file names (refFile), or null. */
export function readRef(file: string): string | null {
  try {
    const sha = readFileSync(file, "utf8").trim();
    return /^[0-9a-f]{40}$/.test(sha) ? sha : null;
  } catch {
    return null;
  }
}
