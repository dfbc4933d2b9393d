// One file of a repository into the cache: written to <file>.incomplete, verified (size, and the
// digest the listing gives), then renamed, so a truncated file is never used. An interrupted
// download (connection cut, process stopped, signal) leaves the partial file; the next attempt
// asks for the rest with a Range request, or starts over if the server ignores it. Processes that
// share the cache download a file once: see lockFile.
import { setTimeout as sleep } from "node:timers/promises";
import { createHash, type Hash } from "node:crypto";
import { createReadStream, existsSync, statSync } from "node:fs";
import { mkdir, open, rename, rm } from "node:fs/promises";
import path from "node:path";
import { isEngineError, loadError } from "../../errors";
import { hubError, hubFetch, resolveUrl, type RepoFile } from "./hub-client";
import type { HubOptions } from "./hub-config";
import { lockAbandoned, readLock, takeOverLock, tryLock } from "@/lib/pid-lock";

const ATTEMPTS = 4;
const STALL_MS = 60_000;

function newHash(file: RepoFile): Hash | null {
  if (!file.digest) return null;
  if (file.digest.algorithm === "sha256") return createHash("sha256");
  return createHash("sha1").update(`blob ${file.size}\0`); // git's blob id
}

async function hashExisting(hash: Hash | null, partial: string) {
  if (!hash) return;
  for await (const chunk of createReadStream(partial)) hash.update(chunk as Buffer);
}

const isDiskFull = (e: unknown) => ["ENOSPC", "EDQUOT"].includes((e as { code?: string })?.code ?? "");

/** Downloads in progress in this process, by target path (two loads of one repository share files). */
const inFlight = new Map<string, Promise<void>>();

type Opts = { signal?: AbortSignal; onBytes: (done: number) => void };

/** One file to bring into the cache: where from, where to (`target`, via `partial`), and for whom. */
interface FileJob {
  hub: HubOptions;
  repo: string;
  revision: string;
  file: RepoFile;
  dir: string;
  target: string;
  partial: string;
  opts: Opts;
}

export function downloadFile(
  hub: HubOptions,
  repo: string,
  revision: string,
  file: RepoFile,
  dir: string,
  opts: Opts,
): Promise<void> {
  const target = path.join(dir, file.path);
  const running = inFlight.get(target);
  if (running) return running.catch(() => {}).then(() => downloadFile(hub, repo, revision, file, dir, opts));
  const job = { hub, repo, revision, file, dir, target, partial: `${target}.incomplete`, opts };
  const p = fetchFile(job).finally(() => inFlight.delete(target));
  inFlight.set(target, p);
  return p;
}

async function fetchFile(job: FileJob): Promise<void> {
  const { file, target, partial, opts } = job;
  const complete = () => existsSync(target) && statSync(target).size === file.size;
  if (complete()) return opts.onBytes(file.size);
  await mkdir(path.dirname(target), { recursive: true });
  const release = await lockFile(`${target}.lock`, {
    done: complete,
    waiting: () => opts.onBytes(Math.min(statSync(partial, { throwIfNoEntry: false })?.size ?? 0, file.size)),
    signal: opts.signal,
    repo: job.repo,
  });
  if (!release) return opts.onBytes(file.size); // another process downloaded it meanwhile
  try {
    if (complete()) return opts.onBytes(file.size); // it did, just before letting go
    await download(job);
  } finally {
    release();
  }
}

async function download(job: FileJob): Promise<void> {
  const { hub, repo, revision, file, dir, target, partial, opts } = job;
  let lastError = "";
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    let start = existsSync(partial) ? statSync(partial).size : 0;
    if (start > file.size) {
      await rm(partial, { force: true });
      start = 0;
    }
    let hash = newHash(file);
    // What arrived before is hashed first, before the request and its stall timer: hashing
    // gigabytes can take longer than the stall timeout, which then cut every resumed attempt.
    if (start > 0 && hash) await hashExisting(hash, partial);
    // A connection that stops sending is dropped after stallMs without a byte, then resumed.
    const stall = new AbortController();
    let timer = setTimeout(() => stall.abort(), hub.stallMs ?? STALL_MS);
    const alive = () => {
      clearTimeout(timer);
      timer = setTimeout(() => stall.abort(), hub.stallMs ?? STALL_MS);
    };
    const signal = opts.signal ? AbortSignal.any([opts.signal, stall.signal]) : stall.signal;
    let res: Response;
    try {
      res = await hubFetch(hub, resolveUrl(hub, repo, revision, file.path), {
        headers: start > 0 ? { range: `bytes=${start}-` } : {},
        signal,
      });
    } catch (e) {
      clearTimeout(timer);
      if (!stall.signal.aborted || opts.signal?.aborted) throw e;
      lastError = `no response within ${hub.stallMs ?? STALL_MS} ms`;
      continue;
    }
    const resumed = res.status === 206 && res.headers.get("content-range")?.startsWith(`bytes ${start}-`) === true;
    if (res.status === 416 || (res.status === 206 && !resumed)) {
      // Not the range asked for: start the file over.
      clearTimeout(timer);
      await res.body?.cancel();
      await rm(partial, { force: true });
      continue;
    }
    if (!res.ok) {
      clearTimeout(timer);
      await res.body?.cancel();
      // A CDN's passing failure (5xx) or its rate limit (429) is tried again, after a pause (its
      // Retry-After, up to 10 s), like a cut connection; before, it failed the whole load.
      if (res.status >= 500 || res.status === 429) {
        lastError = `${file.path} answered ${res.status}`;
        const after = Number(res.headers.get("retry-after"));
        const pauseMs = Math.min(10_000, Number.isFinite(after) && after > 0 ? after * 1000 : 1000 * (attempt + 1));
        await sleep(pauseMs, undefined, { signal: opts.signal }).catch(() => {});
        if (opts.signal?.aborted) throw loadError("cancelled", `download of ${repo} cancelled`);
        continue;
      }
      throw hubError(hub, res, repo, file.path);
    }
    if (!resumed && start > 0) {
      start = 0; // the server sent the whole file
      hash = newHash(file);
    }
    let done = start;
    opts.onBytes(done);
    let fh;
    try {
      fh = await open(partial, resumed ? "a" : "w");
    } catch (e) {
      clearTimeout(timer);
      if (isDiskFull(e))
        throw loadError("disk_full", `no space left on the disk of ${dir} for ${file.path} of ${repo}`);
      throw e;
    }
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        await fh.write(chunk);
        hash?.update(chunk);
        done += chunk.length;
        opts.onBytes(done);
        alive();
      }
    } catch (e) {
      clearTimeout(timer);
      await fh.close();
      if (opts.signal?.aborted)
        throw loadError("cancelled", `download of ${repo} cancelled (${file.path} kept for resuming)`);
      if (isDiskFull(e)) {
        // Not kept for resuming: a full disk takes down what shares it (the embedded database).
        await rm(partial, { force: true });
        throw loadError("disk_full", `no space left on the disk of ${dir} while downloading ${file.path} of ${repo}`);
      }
      if (isEngineError(e)) throw e;
      lastError = stall.signal.aborted ? `no data for ${hub.stallMs ?? STALL_MS} ms` : (e as Error).message;
      continue; // connection cut or stalled: resume from what arrived
    }
    clearTimeout(timer);
    await fh.close();
    if (done !== file.size) {
      lastError = `got ${done} of ${file.size} bytes`;
      if (done > file.size) await rm(partial, { force: true });
      continue;
    }
    if (hash && hash.digest("hex") !== file.digest!.hex) {
      await rm(partial, { force: true });
      hash = null;
      lastError = `${file.path} does not match its ${file.digest!.algorithm} digest`;
      continue;
    }
    await rename(partial, target);
    return;
  }
  throw loadError("network", `downloading ${file.path} of ${repo} failed ${ATTEMPTS} times (${lastError})`);
}

const LOCK_BEAT_MS = 5_000;
const LOCK_STALE_MS = 30_000;
const LOCK_POLL_MS = 250;

/**
 * Another process with the same DATA_DIR (a second worker) may be downloading the same file: the
 * one that creates `<file>.lock` (exclusively) downloads it, touching the lock every 5 s; the
 * others wait, reporting the partial file's size as their progress, until the file is complete
 * (null: nothing to download) or the lock is gone (they take it; the partial file is resumed).
 * A lock whose process is gone (same host; or that names this process, which does not hold it)
 * or untouched for 30 s is taken over (lib/pid-lock.ts: of two waiters, one).
 */
async function lockFile(
  lock: string,
  o: { done: () => boolean; waiting: () => void; signal?: AbortSignal; repo: string },
): Promise<(() => void) | null> {
  for (;;) {
    const release = tryLock(lock, { beatMs: LOCK_BEAT_MS });
    if (release) return release;
    if (o.done()) return null;
    const held = readLock(lock);
    if (held && lockAbandoned(held, { staleMs: LOCK_STALE_MS })) {
      takeOverLock(lock, held);
      continue;
    }
    o.waiting();
    if (o.signal?.aborted) throw loadError("cancelled", `download of ${o.repo} cancelled`);
    await sleep(LOCK_POLL_MS);
  }
}
