// Hub settings from the environment (documented in docs/api.md, "Configuration"):
//   HF_ENDPOINT     the hub or a mirror serving the same API (default https://huggingface.co)
//   HF_TOKEN        bearer token, sent to HF_ENDPOINT's origin only (never across a redirect)
//   HF_HUB_OFFLINE  1/true/yes/on: never download; use what the cache holds
//   DATA_DIR        downloads are cached under DATA_DIR/hub (default ./.data/hub)
import path from "node:path";
import { isHubId } from "@/lib/contracts/models";

export interface HubOptions {
  endpoint: string;
  token: string | null;
  offline: boolean;
  cacheDir: string;
  /** A download that sends nothing for this long is dropped and resumed (default 60 s). */
  stallMs?: number;
}

const truthy = (v: string | undefined) => ["1", "true", "yes", "on"].includes((v ?? "").trim().toLowerCase());

export function hubOptionsFromEnv(e: NodeJS.ProcessEnv = process.env): HubOptions {
  const endpoint = (e.HF_ENDPOINT?.trim() || "https://huggingface.co").replace(/\/+$/, "");
  return {
    endpoint,
    token: e.HF_TOKEN?.trim() || null,
    offline: truthy(e.HF_HUB_OFFLINE),
    cacheDir: path.resolve(e.DATA_DIR?.trim() || "./.data", "hub"),
  };
}

export function parseHubId(spec: string): { repo: string; revision: string } | null {
  if (!isHubId(spec)) return null;
  const [repo, revision = "main"] = spec.split("@");
  return { repo, revision };
}

/** Where a repository's revision is cached: <cacheDir>/models--org--name/<revision>. */
export function snapshotDir(cacheDir: string, repo: string, revision: string): string {
  return path.join(cacheDir, `models--${repo.replace("/", "--")}`, encodeURIComponent(revision));
}
