// HTTP to the hub: the token goes to the endpoint's origin only (redirects are followed by hand,
// so a CDN never sees it), and every failure becomes a classified load error.
import { loadError, type EngineError } from "../../errors";
import type { HubOptions } from "./hub-config";

export interface RepoFile {
  path: string;
  size: number;
  /** sha256 of the content (LFS files) or the git blob sha1, to verify a download. */
  digest: { algorithm: "sha256" | "git-sha1"; hex: string } | null;
}

/** GET (or HEAD) with the token on the endpoint's origin and redirects followed by hand. */
export async function hubFetch(
  hub: HubOptions,
  url: string,
  init: { headers?: Record<string, string>; signal?: AbortSignal; method?: string } = {},
): Promise<Response> {
  const origin = new URL(hub.endpoint).origin;
  let target = new URL(url);
  for (let hop = 0; hop < 6; hop++) {
    const headers: Record<string, string> = { "user-agent": "lmplatform-engine", ...init.headers };
    if (hub.token && target.origin === origin) headers.authorization = `Bearer ${hub.token}`;
    let res: Response;
    try {
      res = await fetch(target, { method: init.method ?? "GET", headers, signal: init.signal, redirect: "manual" });
    } catch (e) {
      if (init.signal?.aborted) throw loadError("cancelled", `download cancelled`);
      throw loadError("network", `cannot reach ${target.origin}: ${causeOf(e)}`);
    }
    const location = res.headers.get("location");
    if (res.status >= 300 && res.status < 400 && location) {
      await res.body?.cancel();
      target = new URL(location, target);
      continue;
    }
    return res;
  }
  throw loadError("network", `too many redirects from ${url}`);
}

const causeOf = (e: unknown) => {
  const err = e as { message?: string; cause?: { code?: string; message?: string } };
  return err.cause?.code ?? err.cause?.message ?? err.message ?? String(e);
};

/** Classifies a failed response (the hub says what went wrong in X-Error-Code). */
export function hubError(hub: HubOptions, res: Response, repo: string, file?: string): EngineError {
  const code = res.headers.get("x-error-code");
  const page = `${hub.endpoint}/${repo}`;
  const what = file ? `${file} of model ${repo}` : `model ${repo}`;
  if (code === "RepoNotFound" || (!file && res.status === 404))
    return loadError(
      "not_found",
      `model ${repo} not found on ${hub.endpoint}` + (hub.token ? "" : " (if it is private, set HF_TOKEN)"),
    );
  if (code === "RevisionNotFound")
    return loadError("not_found", `model ${repo}: revision not found on ${hub.endpoint}`);
  // Without a token, a gated repo answers 401 with X-Error-Code GatedRepo: the token is what is missing.
  if (res.status === 401 && !hub.token)
    return loadError(
      "unauthorized",
      `model ${repo} is gated or private (401): set HF_TOKEN to a token with access to ${page}`,
    );
  if (code === "GatedRepo" || res.status === 403)
    return loadError(
      "forbidden",
      `model ${repo} is gated or private and this token has no access (${res.status}): accept its conditions at ${page} ` +
        `with the account of HF_TOKEN`,
    );
  if (res.status === 401)
    return loadError("unauthorized", `the hub refused HF_TOKEN for model ${repo} (401): check the token`);
  if (res.status === 404) return loadError("invalid_model", `${what} not found on ${hub.endpoint} (404)`);
  return loadError("network", `${hub.endpoint} answered ${res.status} for ${what}; retry later`);
}

/**
 * An endpoint that answered one of the hub's API calls with something other than JSON (a mirror of
 * files only, a proxy's HTML page): said as such, where a bare SyntaxError failed the load.
 */
const notTheHubApi = (hub: HubOptions, what: string, path: string) =>
  loadError(
    "network",
    `${hub.endpoint} did not answer the hub's ${what} (GET ${path}) with JSON: ` +
      "HF_ENDPOINT must serve the hub's API, not only its files",
  );

/**
 * The commit a revision (a branch, a tag, or a commit) names now (GET /api/models/{repo}/revision/{revision},
 * as huggingface_hub's snapshot_download asks): downloads then read that commit only.
 */
export async function resolveCommit(hub: HubOptions, repo: string, revision: string, signal?: AbortSignal) {
  const res = await hubFetch(hub, `${hub.endpoint}/api/models/${repo}/revision/${encodeURIComponent(revision)}`, {
    signal,
  });
  if (!res.ok) {
    await res.body?.cancel();
    throw hubError(hub, res, repo);
  }
  const body = (await res.json().catch(() => null)) as { sha?: unknown } | null;
  if (body === null || typeof body !== "object")
    throw notTheHubApi(hub, "revision API", `/api/models/${repo}/revision/${revision}`);
  const sha = body.sha;
  if (typeof sha !== "string" || !/^[0-9a-f]{40}$/.test(sha))
    throw loadError("network", `${hub.endpoint} named no commit for revision ${revision} of model ${repo}`);
  return sha;
}

/** Every file of a revision, with sizes and digests (GET /api/models/{repo}/tree/{revision}). */
export async function listRepoFiles(hub: HubOptions, repo: string, revision: string, signal?: AbortSignal) {
  const files: RepoFile[] = [];
  let url: string | null = `${hub.endpoint}/api/models/${repo}/tree/${encodeURIComponent(revision)}?recursive=true`;
  while (url) {
    const res = await hubFetch(hub, url, { signal });
    if (!res.ok) {
      await res.body?.cancel();
      throw hubError(hub, res, repo);
    }
    const page = (await res.json().catch(() => null)) as
      { type: string; path: string; size?: number; oid?: string; lfs?: { oid?: string; size?: number } }[] | null;
    if (!Array.isArray(page)) throw notTheHubApi(hub, "file listing", `/api/models/${repo}/tree/${revision}`);
    for (const e of page) {
      if (e.type !== "file") continue;
      const lfs = e.lfs?.oid ? { algorithm: "sha256" as const, hex: e.lfs.oid.replace(/^sha256:/, "") } : null;
      const blob = e.oid ? { algorithm: "git-sha1" as const, hex: e.oid } : null;
      files.push({ path: e.path, size: e.lfs?.size ?? e.size ?? 0, digest: lfs ?? blob });
    }
    // Large repositories are paginated: Link: <url>; rel="next".
    const next = /<([^>]+)>;\s*rel="next"/.exec(res.headers.get("link") ?? "");
    url = next ? new URL(next[1], hub.endpoint).toString() : null;
  }
  return files;
}

export const resolveUrl = (hub: HubOptions, repo: string, revision: string, file: string) =>
  `${hub.endpoint}/${repo}/resolve/${encodeURIComponent(revision)}/${file.split("/").map(encodeURIComponent).join("/")}`;
