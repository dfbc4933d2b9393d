// A local stand-in for the Hugging Face hub (tests have no network): serves model folders as
// repositories at /{org}/{name}/resolve/{revision}/{file} (Range requests included), lists
// them at /api/models/{org}/{name}/tree/{revision} and names a revision's commit at
// /api/models/{org}/{name}/revision/{revision}, with the hub's error codes. The one branch is
// `main`; pointing a repository at another folder (`push`) is a new commit, and the earlier
// commits stay readable by their sha. Large files can be
// redirected to a second origin (a CDN), cut off mid-body, slowed down or corrupted.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";

export interface HubServerOptions {
  /** "org/name" → model folder. */
  repos: Record<string, string>;
  /** "org/name" → the only token that may read it (401 without one, 403 with another). */
  tokens?: Record<string, string>;
  /** Serve .onnx and *_data files through a redirect to another origin, as the hub does for LFS. */
  cdn?: boolean;
  /** Listing entries per page (the hub paginates with a Link header). */
  pageSize?: number;
}

export interface Fault {
  /** Path in the repository. */
  file: string;
  /** Bytes sent before the connection is destroyed (cut) or before waiting (slow). */
  after: number;
  /** error: answers `status` (a CDN's 503, its 429 with `Retry-After: 1`) instead of the file. */
  kind: "cut" | "slow" | "corrupt" | "error";
  status?: number;
  /** How many responses it applies to. */
  times: number;
}

export interface RecordedRequest {
  method: string;
  path: string;
  origin: "hub" | "cdn";
  authorization: string | undefined;
  range: string | undefined;
}

const isLfs = (f: string) => f.endsWith(".onnx") || /\.onnx_data(_\d+)?$/.test(f);

function listFolder(dir: string, prefix = ""): string[] {
  return readdirSync(path.join(dir, prefix), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? listFolder(dir, path.posix.join(prefix, e.name)) : [path.posix.join(prefix, e.name)],
  );
}

/** A folder's commit id: a digest of its files' paths and contents. */
const commitIds = new Map<string, string>();
function commitOf(dir: string): string {
  let sha = commitIds.get(dir);
  if (!sha) {
    const h = createHash("sha1");
    for (const f of listFolder(dir).sort()) h.update(`${f}\0`).update(readFileSync(path.join(dir, f)));
    sha = h.digest("hex");
    commitIds.set(dir, sha);
  }
  return sha;
}

export async function startHubServer(opts: HubServerOptions) {
  const repos = { ...opts.repos };
  /** "org/name@sha" → folder, for every commit `main` has named. */
  const commits = new Map<string, string>();
  const head = (repo: string) => {
    const dir = repos[repo];
    if (!dir) return null;
    const sha = commitOf(dir);
    commits.set(`${repo}@${sha}`, dir);
    return { sha, dir };
  };
  for (const repo of Object.keys(repos)) head(repo);
  const requests: RecordedRequest[] = [];
  const faults: Fault[] = [];
  let cdnUrl = "";

  const serveFile = (req: http.IncomingMessage, res: http.ServerResponse, file: string, repoPath: string) => {
    let body = readFileSync(file);
    const fault = faults.find((f) => f.file === repoPath && f.times > 0);
    if (fault) fault.times--;
    if (fault?.kind === "corrupt") body = Buffer.from(body.map((b, i) => (i === fault.after ? b ^ 0xff : b)));
    if (fault?.kind === "error") {
      const status = fault.status ?? 503;
      res.writeHead(status, status === 429 ? { "retry-after": "1" } : {}).end("busy");
      return;
    }
    const size = body.length;
    const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? "");
    let start = 0;
    if (m) {
      start = Number(m[1]);
      if (start >= size) {
        res.writeHead(416, { "content-range": `bytes */${size}` }).end();
        return;
      }
      res.writeHead(206, { "content-length": size - start, "content-range": `bytes ${start}-${size - 1}/${size}` });
    } else res.writeHead(200, { "content-length": size });
    if (req.method === "HEAD") return void res.end();
    const rest = body.subarray(start);
    if (fault?.kind === "cut") {
      // A graceful close (FIN) before the announced length: the client sees every byte sent, then an error.
      res.write(rest.subarray(0, fault.after), () => res.socket?.end());
    } else if (fault?.kind === "slow") {
      res.write(rest.subarray(0, fault.after));
      setTimeout(() => res.end(rest.subarray(fault.after)), 2000);
    } else res.end(rest);
  };

  const fail = (res: http.ServerResponse, status: number, code?: string) =>
    res
      .writeHead(status, { "content-type": "application/json", ...(code ? { "x-error-code": code } : {}) })
      .end(JSON.stringify({ error: code ?? `status ${status}` }));

  const hub = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://hub");
    requests.push({
      method: req.method ?? "GET",
      path: url.pathname + url.search,
      origin: "hub",
      authorization: req.headers.authorization,
      range: req.headers.range,
    });
    const tree = /^\/api\/models\/([^/]+\/[^/]+)\/tree\/([^/]+)$/.exec(url.pathname);
    const revisionInfo = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/([^/]+)$/.exec(url.pathname);
    const resolve = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(url.pathname);
    const repo = tree?.[1] ?? revisionInfo?.[1] ?? resolve?.[1];
    if (!repo || !repos[repo]) return fail(res, 404, "RepoNotFound");
    const token = opts.tokens?.[repo];
    if (token) {
      // As the hub answers a gated repository's files without a token: 401, GatedRepo.
      if (!req.headers.authorization) return fail(res, 401, "GatedRepo");
      if (req.headers.authorization !== `Bearer ${token}`) return fail(res, 403, "GatedRepo");
    }
    const revision = decodeURIComponent((tree ?? revisionInfo ?? resolve)![2]);
    const main = head(repo)!;
    const sha = revision === "main" ? main.sha : revision;
    const dir = commits.get(`${repo}@${sha}`);
    if (!dir) return fail(res, 404, "RevisionNotFound");
    if (revisionInfo)
      return res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ id: repo, sha }));
    if (tree) {
      const files = listFolder(dir).sort();
      const entries = files.map((f) => {
        const bytes = readFileSync(path.join(dir, f));
        const blob = createHash("sha1").update(`blob ${bytes.length}\0`).update(bytes).digest("hex");
        return {
          type: "file",
          path: f,
          size: bytes.length,
          oid: blob,
          ...(isLfs(f) ? { lfs: { oid: createHash("sha256").update(bytes).digest("hex"), size: bytes.length } } : {}),
        };
      });
      const all = [{ type: "directory", path: "onnx", oid: "0", size: 0 }, ...entries];
      const from = Number(url.searchParams.get("cursor") ?? 0);
      const size = opts.pageSize ?? all.length;
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (from + size < all.length) headers.link = `<${url.pathname}?recursive=true&cursor=${from + size}>; rel="next"`;
      return res.writeHead(200, headers).end(JSON.stringify(all.slice(from, from + size)));
    }
    const file = decodeURIComponent(resolve![3]);
    const full = path.join(dir, file);
    if (file.includes("..") || !statSync(full, { throwIfNoEntry: false })?.isFile())
      return fail(res, 404, "EntryNotFound");
    if (opts.cdn && isLfs(file)) {
      const location = `${cdnUrl}/blob/${encodeURIComponent(repo)}/${sha}/${encodeURIComponent(file)}`;
      return res.writeHead(302, { location }).end();
    }
    serveFile(req, res, full, file);
  });

  const cdn = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://cdn");
    requests.push({
      method: req.method ?? "GET",
      path: url.pathname,
      origin: "cdn",
      authorization: req.headers.authorization,
      range: req.headers.range,
    });
    const m = /^\/blob\/([^/]+)\/([0-9a-f]{40})\/([^/]+)$/.exec(url.pathname);
    const repo = m ? decodeURIComponent(m[1]) : "";
    const file = m ? decodeURIComponent(m[3]) : "";
    const dir = m ? commits.get(`${repo}@${m[2]}`) : undefined;
    if (!dir) return fail(res, 404);
    serveFile(req, res, path.join(dir, file), file);
  });

  const listen = (s: http.Server) =>
    new Promise<string>((r) =>
      s.listen(0, "127.0.0.1", () => r(`http://127.0.0.1:${(s.address() as AddressInfo).port}`)),
    );
  const url = await listen(hub);
  cdnUrl = await listen(cdn);
  return {
    url,
    requests,
    /** Makes the next `times` responses for `file` misbehave. */
    fault: (f: Fault) => faults.push(f),
    clearFaults: () => faults.splice(0),
    /** The commit `main` of `repo` names now. */
    commit: (repo: string) => head(repo)!.sha,
    /** A new commit on `main`: the repository's files are now those of `dir`. */
    push: (repo: string, dir: string) => {
      repos[repo] = dir;
      return head(repo)!.sha;
    },
    close: async () => {
      hub.closeAllConnections();
      cdn.closeAllConnections();
      await Promise.all([new Promise((r) => hub.close(r)), new Promise((r) => cdn.close(r))]);
    },
  };
}
