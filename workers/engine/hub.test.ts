// Hub ids: download by id from HF_ENDPOINT (a local stand-in here) into DATA_DIR/hub with
// progress, cache reuse, the token sent to the endpoint only, classified errors, and downloads
// that recover from interruptions without ever using a truncated file.
import http from "node:http";
import { spawn, spawnSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { mkdir, mkdtemp, statfs } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Engine } from "./engine";
import { hubOptionsFromEnv, snapshotDir, type HubOptions } from "./model/hub/hub-config";
import { claimRoom } from "./model/hub/download";
import { loadModel, loadTokenizer, type LoadModelOptions } from "./model/load-model";
import { modelDtypes } from "./model/model-dtypes";
import type { LoadProgress } from "./model/progress";
import { startHubServer } from "./testing/hub-server";
import { cachedTinyModel } from "@/scripts/tiny-model/generate";
import { llamaModelDir } from "./testing/models";

let server: Awaited<ReturnType<typeof startHubServer>>;
let tiny: string;
beforeAll(async () => {
  tiny = await cachedTinyModel({ family: "llama", dtypes: ["fp32", "q4"] });
  server = await startHubServer({
    repos: { "org/tiny": tiny, "org/moving": tiny, "org/private": tiny, "org/random-llama": await llamaModelDir() },
    tokens: { "org/private": "hf_secret" },
    cdn: true,
    pageSize: 4,
  });
});
afterAll(() => server.close());
afterEach(() => server.clearFaults());

const newCache = () => mkdtemp(path.join(os.tmpdir(), "lmp-hub-"));
const hub = (cacheDir: string, extra: Partial<HubOptions> = {}): HubOptions => ({
  endpoint: server.url,
  token: null,
  offline: false,
  cacheDir,
  ...extra,
});
const load = (id: string, opts: LoadModelOptions) => loadModel(id, opts);
const since = (n: number) => server.requests.slice(n);
const greedy = async (dirOrId: string, opts: LoadModelOptions) => {
  const engine = new Engine({ models: [dirOrId], loadOptions: () => opts });
  const r = await engine.generate({ prompt: "The dog sleeps", max_tokens: 12, temperature: 0 });
  await engine.dispose();
  return r.choices[0].text;
};

describe("hub downloads", () => {
  it("downloads what one dtype needs, reporting bytes per file and overall, and serves it", async () => {
    const cacheDir = await newCache();
    const events: LoadProgress[] = [];
    const m = await load("org/tiny", { dtype: "q4", hub: hub(cacheDir), onProgress: (p) => events.push(p) });
    expect(m.info.dtype).toBe("q4");
    const dir = snapshotDir(cacheDir, "org/tiny", server.commit("org/tiny"));
    expect(m.dir).toBe(dir);
    expect(existsSync(path.join(dir, "onnx/model_q4.onnx"))).toBe(true);
    expect(existsSync(path.join(dir, "onnx/model.onnx"))).toBe(false); // other dtypes are not fetched
    expect(events[0]).toEqual({ state: "resolving", id: "org/tiny" });
    expect(events.at(-2)).toEqual({ state: "loading", dtype: "q4" });
    expect(events.at(-1)).toEqual({ state: "ready", dtype: "q4" });
    const downloads = events.filter((e) => e.state === "downloading");
    const last = downloads.at(-1)!;
    const size = (f: string) => readFileSync(path.join(tiny, f)).length;
    expect(last.files.map((f) => f.file).sort()).toEqual(
      [
        "config.json",
        "generation_config.json",
        "onnx/model_q4.onnx",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
      ].sort(),
    );
    for (const f of last.files) expect(f).toEqual({ file: f.file, done: size(f.file), total: size(f.file) });
    expect(last.done).toBe(last.total);
    expect(last.total).toBe(last.files.reduce((a, f) => a + size(f.file), 0));
    expect(downloads.some((e) => e.file.file === "onnx/model_q4.onnx")).toBe(true);
    // Byte for byte the repository's files, so the same model: the same text as the folder itself.
    expect(
      readFileSync(path.join(dir, "onnx/model_q4.onnx")).equals(readFileSync(path.join(tiny, "onnx/model_q4.onnx"))),
    ).toBe(true);
    await m.dispose();
    expect(await greedy("org/tiny", { dtype: "q4", hub: hub(cacheDir) })).toBe(await greedy(tiny, { dtype: "q4" }));
  });

  it("a tokenizer alone (counting a dataset's tokens) fetches its files only, and none once a dtype is cached", async () => {
    const cacheDir = await newCache();
    const before = server.requests.length;
    const { dir, tokenizer } = await loadTokenizer("org/tiny", { hub: hub(cacheDir) });
    expect(tokenizer.encode("The dog sleeps").length).toBeGreaterThan(0);
    const fetched = since(before).map((r) => r.path);
    expect(fetched.some((p) => p.includes(".onnx"))).toBe(false); // before: the graph and its weights
    expect(fetched.some((p) => p.endsWith("/tokenizer.json"))).toBe(true);
    expect(existsSync(path.join(dir, "onnx"))).toBe(false);
    // Cached: no request. A model downloaded in some dtype has the tokenizer already.
    const again = server.requests.length;
    await loadTokenizer("org/tiny", { hub: hub(cacheDir) });
    expect(server.requests.length).toBe(again);
    const other = await newCache();
    await (await load("org/tiny", { dtype: "q4", hub: hub(other) })).dispose();
    const afterModel = server.requests.length;
    await loadTokenizer("org/tiny", { hub: hub(other, { offline: true }) });
    expect(server.requests.length).toBe(afterModel);
    // Stopped by its signal (a dataset deleted, a worker stopping) without waiting for the files.
    const stopped = new AbortController();
    stopped.abort(new Error("dataset deleted"));
    await expect(loadTokenizer("org/tiny", { hub: hub(await newCache()), signal: stopped.signal })).rejects.toThrow();
  });

  it("reuses the cache on restart without a request, also offline; offline without it is a clear error", async () => {
    const cacheDir = await newCache();
    await (await load("org/tiny", { dtype: "fp32", hub: hub(cacheDir) })).dispose();
    const before = server.requests.length;
    await (await load("org/tiny", { dtype: "fp32", hub: hub(cacheDir) })).dispose();
    await (await load("org/tiny", { dtype: "fp32", hub: hub(cacheDir, { offline: true }) })).dispose();
    expect(since(before)).toEqual([]);
    await expect(load("org/tiny", { dtype: "q4", hub: hub(cacheDir, { offline: true }) })).rejects.toMatchObject({
      reason: "offline",
      message: expect.stringMatching(/HF_HUB_OFFLINE is set and model org\/tiny \(dtype q4\) is not in the cache/),
    });
    expect(since(before)).toEqual([]);
  });

  it("keeps the cache by commit: a branch that moved on is never mixed with the files before, unchanged files are linked", async () => {
    const cacheDir = await newCache();
    const first = server.commit("org/moving");
    const a = await load("org/moving", { dtype: "q4", hub: hub(cacheDir) });
    expect(a.dir).toBe(snapshotDir(cacheDir, "org/moving", first));
    await a.dispose();
    // main moves on: its tokenizer_config.json changes, at the same size.
    const next = await mkdtemp(path.join(os.tmpdir(), "lmp-hub-next-"));
    cpSync(tiny, next, { recursive: true });
    const text = readFileSync(path.join(tiny, "tokenizer_config.json"), "utf8");
    const changed = text.replace(
      /("model_max_length":\s*)(\d+)/,
      (_, key: string, n: string) => key + (String(Number(n) - 1).length === n.length ? Number(n) - 1 : Number(n) + 1),
    );
    expect(changed.length).toBe(text.length);
    expect(changed).not.toBe(text);
    writeFileSync(path.join(next, "tokenizer_config.json"), changed);
    const second = server.push("org/moving", next);
    expect(second).not.toBe(first);

    // What is cached is served as it is, without a request.
    const before = server.requests.length;
    await (await load("org/moving", { dtype: "q4", hub: hub(cacheDir) })).dispose();
    expect(since(before)).toEqual([]);
    // Another dtype comes whole from the new commit (before: the first commit's tokenizer_config.json,
    // same size, was kept next to the new graph).
    const b = await load("org/moving", { dtype: "fp32", hub: hub(cacheDir) });
    expect(b.dir).toBe(snapshotDir(cacheDir, "org/moving", second));
    for (const f of ["config.json", "tokenizer.json", "tokenizer_config.json", "onnx/model.onnx"])
      expect(readFileSync(path.join(b.dir, f)).equals(readFileSync(path.join(next, f))), f).toBe(true);
    await b.dispose();
    // Only what changed, and the new graph, were downloaded; the rest is the first commit's files, linked.
    const downloaded = since(before)
      .filter((r) => r.origin === "hub" && r.path.includes("/resolve/"))
      .map((r) => r.path.split("/").slice(5).join("/"));
    expect(downloaded.sort()).toEqual(["onnx/model.onnx", "tokenizer_config.json"]);
    expect(statSync(path.join(b.dir, "tokenizer.json")).ino).toBe(statSync(path.join(a.dir, "tokenizer.json")).ino);
    // The first commit stays loadable by its sha, from the cache.
    const pinned = await load(`org/moving@${first}`, { dtype: "q4", hub: hub(cacheDir) });
    expect(pinned.dir).toBe(a.dir);
    await pinned.dispose();
    // Offline, main names the second commit, which has no q4: the first commit's complete q4 serves
    // (before: "not in the cache").
    const quiet = server.requests.length;
    const offline = await load("org/moving", { dtype: "q4", hub: hub(cacheDir, { offline: true }) });
    expect(offline.dir).toBe(a.dir);
    await offline.dispose();
    expect(since(quiet)).toEqual([]);
  });

  it("serves an explicit dtype from an auto download that chose it, without a request, also offline", async () => {
    const cacheDir = await newCache();
    const auto = await load("org/tiny", { dtype: "auto", hub: hub(cacheDir) });
    expect(auto.info.dtype).toBe("q4");
    await auto.dispose();
    const before = server.requests.length;
    const q4 = await load("org/tiny", { dtype: "q4", hub: hub(cacheDir, { offline: true }) });
    expect(q4.dir).toBe(auto.dir);
    await q4.dispose();
    expect(since(before)).toEqual([]);
  });

  it("still uses a cache from before snapshots by commit (models--org--name/<revision>)", async () => {
    const cacheDir = await newCache();
    const m = await load("org/tiny", { dtype: "q4", hub: hub(cacheDir) });
    await m.dispose();
    const legacy = path.join(cacheDir, "models--org--tiny", "main");
    renameSync(m.dir, legacy);
    rmSync(path.join(cacheDir, "models--org--tiny", "refs"), { recursive: true });
    const before = server.requests.length;
    const again = await load("org/tiny", { dtype: "q4", hub: hub(cacheDir) });
    expect(again.dir).toBe(legacy);
    expect(since(before)).toEqual([]);
    await again.dispose();
  });

  it("auto picks among the repository's files, and external data comes along", async () => {
    const cacheDir = await newCache();
    const m = await load("org/random-llama", { dtype: "fp16", hub: hub(cacheDir) });
    expect(m.graphFile).toBe("onnx/model_fp16.onnx");
    expect(existsSync(path.join(m.dir, "onnx/model_fp16.onnx_data"))).toBe(true);
    await m.dispose();
    const auto = await load("org/tiny", { hub: hub(cacheDir) });
    expect(auto.info.dtype).toBe("q4"); // fp32 and q4 on offer: the preference's choice
    await auto.dispose();
  });

  it("a private repository: 401 without a token, 403 with another; the token never reaches the CDN", async () => {
    const cacheDir = await newCache();
    await expect(load("org/private", { hub: hub(cacheDir) })).rejects.toMatchObject({
      reason: "unauthorized",
      message: expect.stringMatching(/model org\/private is gated or private \(401\): set HF_TOKEN/),
    });
    await expect(load("org/private", { hub: hub(cacheDir, { token: "hf_other" }) })).rejects.toMatchObject({
      reason: "forbidden",
      message: expect.stringContaining("no access (403)"),
    });
    const before = server.requests.length;
    const m = await load("org/private", { dtype: "q4", hub: hub(cacheDir, { token: "hf_secret" }) });
    await m.dispose();
    const sent = since(before);
    expect(sent.filter((r) => r.origin === "hub").every((r) => r.authorization === "Bearer hf_secret")).toBe(true);
    expect(sent.filter((r) => r.origin === "cdn").map((r) => [r.path, r.authorization])).toEqual([
      [`/blob/org%2Fprivate/${server.commit("org/private")}/onnx%2Fmodel_q4.onnx`, undefined],
    ]);
  });

  it("an unknown repository is not_found with its id; a missing dtype names the repository's files", async () => {
    const cacheDir = await newCache();
    await expect(load("org/nope", { hub: hub(cacheDir) })).rejects.toMatchObject({
      code: "model_not_found",
      reason: "not_found",
      message: expect.stringContaining("model org/nope not found on " + server.url),
    });
    await expect(load("org/tiny@v9", { hub: hub(cacheDir) })).rejects.toMatchObject({ reason: "not_found" });
    await expect(load("org/tiny", { dtype: "fp16", hub: hub(cacheDir) })).rejects.toMatchObject({
      code: "model_not_found",
      reason: "missing_dtype",
      message:
        "model org/tiny has no onnx/model_fp16.onnx (dtype fp16); it has: onnx/model.onnx (fp32), onnx/model_q4.onnx (q4)",
    });
  });

  it("a connection cut mid-file is resumed with a Range request; a corrupted body is never used", async () => {
    const cacheDir = await newCache();
    server.fault({ file: "onnx/model.onnx", after: 100_000, kind: "cut", times: 2 });
    const before = server.requests.length;
    const m = await load("org/tiny", { dtype: "fp32", hub: hub(cacheDir) });
    const ranges = since(before)
      .filter((r) => r.origin === "cdn" && r.path.endsWith("model.onnx"))
      .map((r) => r.range);
    expect(ranges).toEqual([undefined, "bytes=100000-", "bytes=200000-"]);
    expect(
      readFileSync(path.join(m.dir, "onnx/model.onnx")).equals(readFileSync(path.join(tiny, "onnx/model.onnx"))),
    ).toBe(true);
    await m.dispose();

    const other = await newCache();
    server.fault({ file: "onnx/model.onnx", after: 5000, kind: "corrupt", times: 10 });
    await expect(load("org/tiny", { dtype: "fp32", hub: hub(other) })).rejects.toMatchObject({
      reason: "network",
      message: expect.stringContaining("does not match its sha256 digest"),
    });
    const dir = snapshotDir(other, "org/tiny", server.commit("org/tiny"));
    expect(existsSync(path.join(dir, "onnx/model.onnx"))).toBe(false);
    expect(existsSync(path.join(dir, "onnx/model.onnx.incomplete"))).toBe(false);
  });

  it("a download stopped mid-file (worker stopped) resumes from the partial file on the next load", async () => {
    const cacheDir = await newCache();
    server.fault({ file: "onnx/model.onnx", after: 300_000, kind: "slow", times: 1 }); // then a 2 s pause
    const controller = new AbortController();
    const first = load("org/tiny", {
      dtype: "fp32",
      hub: hub(cacheDir),
      signal: controller.signal,
      onProgress: (p) => {
        if (p.state === "downloading" && p.file.file === "onnx/model.onnx" && p.file.done > 0) controller.abort();
      },
    });
    await expect(first).rejects.toMatchObject({ reason: "cancelled" });
    const dir = snapshotDir(cacheDir, "org/tiny", server.commit("org/tiny"));
    expect(existsSync(path.join(dir, "onnx/model.onnx"))).toBe(false);
    const kept = readFileSync(path.join(dir, "onnx/model.onnx.incomplete")).length;
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThan(readFileSync(path.join(tiny, "onnx/model.onnx")).length);
    const before = server.requests.length;
    const m = await load("org/tiny", { dtype: "fp32", hub: hub(cacheDir) });
    const ranges = since(before)
      .filter((r) => r.origin === "cdn" && r.path.endsWith("model.onnx"))
      .map((r) => r.range);
    expect(ranges).toEqual([`bytes=${kept}-`]);
    expect(
      readFileSync(path.join(m.dir, "onnx/model.onnx")).equals(readFileSync(path.join(tiny, "onnx/model.onnx"))),
    ).toBe(true);
    await m.dispose();
  });

  it("a CDN's 503 or 429 is tried again (after its Retry-After), not a failed load", async () => {
    const cacheDir = await newCache();
    server.fault({ file: "onnx/model.onnx", after: 0, kind: "error", status: 503, times: 1 });
    server.fault({ file: "onnx/model.onnx", after: 0, kind: "error", status: 429, times: 1 });
    const before = server.requests.length;
    const t0 = Date.now();
    const m = await load("org/tiny", { dtype: "fp32", hub: hub(cacheDir) });
    const gets = since(before).filter((r) => r.origin === "cdn" && r.path.endsWith("model.onnx"));
    expect(gets).toHaveLength(3);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1_900); // 1 s after the 503, Retry-After: 1 after the 429
    expect(
      readFileSync(path.join(m.dir, "onnx/model.onnx")).equals(readFileSync(path.join(tiny, "onnx/model.onnx"))),
    ).toBe(true);
    await m.dispose();
  });

  it("a connection that stalls is dropped and resumed", async () => {
    const cacheDir = await newCache();
    server.fault({ file: "onnx/model.onnx", after: 200_000, kind: "slow", times: 1 }); // then a 2 s pause
    const before = server.requests.length;
    const m = await load("org/tiny", { dtype: "fp32", hub: hub(cacheDir, { stallMs: 300 }) });
    const ranges = since(before)
      .filter((r) => r.origin === "cdn" && r.path.endsWith("model.onnx"))
      .map((r) => r.range);
    expect(ranges).toHaveLength(2);
    expect(ranges[1]).toMatch(/^bytes=\d+-$/);
    expect(
      readFileSync(path.join(m.dir, "onnx/model.onnx")).equals(readFileSync(path.join(tiny, "onnx/model.onnx"))),
    ).toBe(true);
    await m.dispose();
  });

  it("two processes sharing the cache download each file once: one holds its lock, the other waits", async () => {
    const cacheDir = await newCache();
    server.fault({ file: "onnx/model.onnx", after: 300_000, kind: "slow", times: 1 }); // then a 2 s pause
    const before = server.requests.length;
    const script = path.join(import.meta.dirname, "testing/download-child.ts");
    const run = () =>
      new Promise<{ code: number | null; out: string }>((resolve) => {
        const child = spawn(process.execPath, ["--import", "tsx", script, server.url, cacheDir, "org/tiny"], {
          stdio: ["ignore", "pipe", "pipe"],
        });
        let out = "";
        child.stdout.on("data", (d: Buffer) => (out += d.toString()));
        child.stderr.on("data", (d: Buffer) => (out += d.toString()));
        child.on("exit", (code) => resolve({ code, out }));
      });
    const results = await Promise.all([run(), run()]);
    const size = readFileSync(path.join(tiny, "onnx/model.onnx")).length;
    for (const r of results) {
      expect(r.code, r.out).toBe(0);
      expect(JSON.parse(r.out.trim().split("\n").at(-1)!)).toEqual({ graphBytes: size });
    }
    const fetched = since(before).filter((r) => r.origin === "cdn" && r.path.endsWith("model.onnx"));
    expect(fetched.map((r) => r.range)).toEqual([undefined]); // once, whole, by one of them
    const dir = snapshotDir(cacheDir, "org/tiny", server.commit("org/tiny"));
    expect(
      readFileSync(path.join(dir, "onnx/model.onnx")).equals(readFileSync(path.join(tiny, "onnx/model.onnx"))),
    ).toBe(true);
    expect(readdirSync(path.join(dir, "onnx")).sort()).toEqual(["model.onnx"]); // no lock, no partial file left
  });

  it("a lock left by a process that is gone, or by an earlier one with our pid, does not hold a download back", async () => {
    const cacheDir = await newCache();
    const dir = snapshotDir(cacheDir, "org/tiny", server.commit("org/tiny"));
    await mkdir(path.join(dir, "onnx"), { recursive: true });
    const gone = spawnSync(process.execPath, ["-e", "process.pid"]).pid!;
    writeFileSync(path.join(dir, "onnx/model.onnx.lock"), JSON.stringify({ pid: gone, host: os.hostname() }));
    const started = performance.now();
    await (await load("org/tiny", { dtype: "fp32", hub: hub(cacheDir) })).dispose();
    expect(performance.now() - started).toBeLessThan(20_000);
    expect(existsSync(path.join(dir, "onnx/model.onnx.lock"))).toBe(false);

    // A restarted container's worker often gets the pid of the one that left the lock.
    const again = await newCache();
    const dir2 = snapshotDir(again, "org/tiny", server.commit("org/tiny"));
    await mkdir(path.join(dir2, "onnx"), { recursive: true });
    writeFileSync(path.join(dir2, "onnx/model.onnx.lock"), JSON.stringify({ pid: process.pid, host: os.hostname() }));
    const t = performance.now();
    await (await load("org/tiny", { dtype: "fp32", hub: hub(again) })).dispose();
    expect(performance.now() - t).toBeLessThan(20_000); // not the 30 s of an untouched lock
  });

  it("a download that would leave the disk short of HUB_MIN_FREE_BYTES is refused before it starts", async () => {
    const cacheDir = await newCache();
    const before = server.requests.length;
    const free = (await statfs(cacheDir)).bavail * (await statfs(cacheDir)).bsize;
    const err = await load("org/tiny", { dtype: "q4", hub: hub(cacheDir, { minFreeBytes: free }) }).catch((e) => e);
    expect(err).toMatchObject({ reason: "disk_full" });
    expect(err.message).toMatch(/needs [\d.]+ GiB more on the disk of .* GiB free, and [\d.]+ GiB are kept free/);
    // Only the listing and config.json were fetched: no weights.
    expect(since(before).filter((r) => r.path.includes("/resolve/") && !r.path.endsWith("config.json"))).toEqual([]);
    // What is already there counts for nothing: the same model loads with room to spare, and then
    // again with none (nothing left to fetch).
    await (await load("org/tiny", { dtype: "q4", hub: hub(cacheDir) })).dispose();
    await (await load("org/tiny", { dtype: "q4", hub: hub(cacheDir, { minFreeBytes: free }) })).dispose();
  });

  it("an endpoint that does not serve the hub's JSON API is said to be one (not a bare SyntaxError)", async () => {
    const mirror = http.createServer((req, res) => {
      if (req.url?.includes("/revision/")) return void res.end(JSON.stringify({ sha: "a".repeat(40) }));
      res.writeHead(200, { "content-type": "text/html" }).end("<html>a mirror of files only</html>");
    });
    await new Promise<void>((r) => mirror.listen(0, "127.0.0.1", r));
    try {
      const { port } = mirror.address() as { port: number };
      const endpoint = `http://127.0.0.1:${port}`;
      await expect(load("org/tiny", { dtype: "fp32", hub: hub(await newCache(), { endpoint }) })).rejects.toMatchObject(
        {
          reason: "network",
          message: expect.stringContaining("HF_ENDPOINT must serve the hub's API"),
        },
      );
      // A mirror of files only answers the revision API with a page too: the same message.
      const plain = http.createServer(
        (_req, res) => void res.writeHead(200, { "content-type": "text/html" }).end("<html>files</html>"),
      );
      await new Promise<void>((r) => plain.listen(0, "127.0.0.1", r));
      try {
        const other = `http://127.0.0.1:${(plain.address() as { port: number }).port}`;
        await expect(
          load("org/tiny", { dtype: "fp32", hub: hub(await newCache(), { endpoint: other }) }),
        ).rejects.toMatchObject({ reason: "network", message: expect.stringContaining("revision API") });
      } finally {
        plain.close();
      }
    } finally {
      mirror.close();
    }
  });

  it("counts the bytes downloads under way will still write as taken; a finished one gives them back", async () => {
    const cacheDir = await newCache();
    const fs = await statfs(cacheDir);
    const part = Math.floor(fs.bavail * fs.bsize * 0.4);
    const h = hub(cacheDir, { minFreeBytes: 0 });
    const first = await claimRoom(h, cacheDir, "org/a", "fp32", part);
    const second = await claimRoom(h, cacheDir, "org/b", "fp32", part);
    // A third would not fit beside the two under way (alone, it would).
    const err = await claimRoom(h, cacheDir, "org/c", "fp32", part).catch((e) => e);
    expect(err).toMatchObject({
      reason: "disk_full",
      message: expect.stringContaining("promised to downloads under way"),
    });
    first();
    first(); // once only
    const third = await claimRoom(h, cacheDir, "org/c", "fp32", part);
    second();
    third();
  });

  it("a full disk is reported as disk_full", async () => {
    const cacheDir = await newCache();
    const dir = snapshotDir(cacheDir, "org/tiny", server.commit("org/tiny"));
    await mkdir(path.join(dir, "onnx"), { recursive: true });
    symlinkSync("/dev/full", path.join(dir, "onnx/model_q4.onnx.incomplete")); // every write fails with ENOSPC
    await expect(load("org/tiny", { dtype: "q4", hub: hub(cacheDir) })).rejects.toMatchObject({
      reason: "disk_full",
      message: expect.stringContaining("no space left"),
    });
  });
});

describe("model dtypes", () => {
  it("lists a hub repository's dtypes and auto's choice without downloading it", async () => {
    const before = server.requests.length;
    expect(await modelDtypes("org/tiny", hub(await newCache()))).toEqual({
      dtypes: ["fp32", "q4"],
      auto: "q4",
      unsupported: [],
    });
    // The listing comes in pages of 4 entries (Link: rel="next"); then config.json alone.
    const paths = since(before).map((r) => r.path.split("?")[0]);
    expect(paths.length).toBeGreaterThan(2);
    expect(paths.slice(0, -1).every((p) => p === "/api/models/org/tiny/tree/main")).toBe(true);
    expect(paths.at(-1)).toBe("/org/tiny/resolve/main/config.json");
    expect(await modelDtypes(await llamaModelDir())).toEqual({
      dtypes: ["fp32", "fp16"],
      auto: "fp32",
      unsupported: [],
    });
    await expect(modelDtypes("org/private", hub(await newCache()))).rejects.toMatchObject({ reason: "unauthorized" });
  });
});

describe("hub settings", () => {
  it("come from HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE and DATA_DIR", () => {
    expect(hubOptionsFromEnv({} as NodeJS.ProcessEnv)).toEqual({
      endpoint: "https://huggingface.co",
      token: null,
      offline: false,
      cacheDir: path.resolve(".data/hub"),
    });
    expect(
      hubOptionsFromEnv({
        HF_ENDPOINT: "https://hf-mirror.example/",
        HF_TOKEN: "hf_x",
        HF_HUB_OFFLINE: "1",
        DATA_DIR: "/srv/lmp",
      } as unknown as NodeJS.ProcessEnv),
    ).toEqual({ endpoint: "https://hf-mirror.example", token: "hf_x", offline: true, cacheDir: "/srv/lmp/hub" });
  });

  it("a string that is neither a folder nor a hub id is not_found", async () => {
    await expect(loadModel("./no/such/folder")).rejects.toMatchObject({ reason: "not_found" });
    await expect(loadModel("not a model", { hub: hub(await newCache()) })).rejects.toMatchObject({
      reason: "not_found",
      message: expect.stringContaining("is not a hub id"),
    });
  });
});
