import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { verifySignedUrl } from "../signing";
import { LocalBlobStore } from "./local-blob-store";

process.env.AUTH_SECRET ??= "unit-test-secret-0123456789-0123456789";
const root = mkdtempSync(path.join(os.tmpdir(), "lmp-blobs-"));
const store = new LocalBlobStore(root);
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function* parts(...chunks: string[]): AsyncGenerator<Buffer> {
  for (const c of chunks) yield Buffer.from(c);
}

describe("LocalBlobStore", () => {
  it("writes a file under its key and opens it", async () => {
    await store.put("datasets/d1/a/one.jsonl", parts("a\n", "b\n"));
    expect(readFileSync(path.join(root, "datasets/d1/a/one.jsonl"), "utf8")).toBe("a\nb\n");
    const file = await store.open("datasets/d1/a/one.jsonl");
    expect(file?.size).toBe(4);
    expect(await new Response(file!.stream()).text()).toBe("a\nb\n");
    expect(await store.open("datasets/d1/a/none.jsonl")).toBeUndefined();
  });

  it("refuses a write that would leave less than minFreeBytes on the disk, with a 507, keeping nothing", async () => {
    const dir = path.join(root, "full");
    const full = new LocalBlobStore(dir, Number.MAX_SAFE_INTEGER); // as if the disk were nearly full
    // Before: written until the disk was full, the embedded database's WAL with it.
    await expect(full.put("imports/i9/upload.jsonl", parts("a\n", "b\n"))).rejects.toMatchObject({
      status: 507,
      message: expect.stringMatching(/disk is nearly full.*BLOB_MIN_FREE_BYTES/),
    });
    expect(existsSync(path.join(dir, "imports/i9/upload.jsonl"))).toBe(false);
    expect(readdirSync(path.join(dir, ".tmp"))).toEqual([]);
    const roomy = new LocalBlobStore(dir, 1024);
    await roomy.put("imports/i9/upload.jsonl", parts("a\n"));
    expect(readFileSync(path.join(dir, "imports/i9/upload.jsonl"), "utf8")).toBe("a\n");
  });

  it("keeps its files from other local users: folders 0700, files 0600", async () => {
    const own = new LocalBlobStore(path.join(root, "private"));
    await own.put("imports/i1/upload.jsonl", parts("secret\n"));
    const mode = (p: string) => statSync(path.join(root, "private", p)).mode & 0o777;
    expect(mode("imports/i1/upload.jsonl")).toBe(0o600); // before: 0644
    for (const dir of ["", "imports", "imports/i1", ".tmp"]) expect(mode(dir), dir || "root").toBe(0o700);
  });

  it("shows nothing under the key until the whole file is written, and nothing after a failure", async () => {
    const key = "datasets/d2/a/two.jsonl";
    let seenMidway: boolean | undefined;
    async function* body(): AsyncGenerator<Buffer> {
      yield Buffer.from("first\n");
      seenMidway = existsSync(path.join(root, key));
      throw new Error("boom");
    }
    await expect(store.put(key, body())).rejects.toThrow("boom");
    expect(seenMidway).toBe(false);
    expect(existsSync(path.join(root, key))).toBe(false);
    expect(readdirSync(path.join(root, ".tmp"))).toEqual([]);
  });

  it("removes a prefix folder and signs download URLs for the app's blob route", async () => {
    await store.put("datasets/d3/a/x.jsonl", parts("x"));
    await store.put("datasets/d30/a/y.jsonl", parts("y"));
    await store.removePrefix("datasets/d3/");
    expect(existsSync(path.join(root, "datasets/d3"))).toBe(false);
    expect(existsSync(path.join(root, "datasets/d30/a/y.jsonl"))).toBe(true);
    const { url, expiresAt } = await store.downloadUrl("datasets/d30/a/y.jsonl", { ttlSeconds: 120 });
    const parsed = new URL(url);
    expect(parsed.pathname).toBe("/v1/blobs/datasets/d30/a/y.jsonl");
    expect(verifySignedUrl(parsed)).toEqual({ ok: true });
    expect(Number(parsed.searchParams.get("expires")) * 1000).toBe(expiresAt.getTime());
  });

  it("refuses keys that could escape the folder", async () => {
    for (const key of ["../x", "a/../../x", "/etc/passwd", "a//b", ".tmp/x", ""]) {
      await expect(store.put(key, parts("x")), key).rejects.toThrow(/invalid blob key/);
    }
  });

  it("sweeps temporary files left by killed writers, not fresh ones", async () => {
    const tmp = path.join(root, ".tmp");
    writeFileSync(path.join(tmp, "old"), "partial");
    writeFileSync(path.join(tmp, "fresh"), "partial");
    const anHourAgo = new Date(Date.now() - 3600_000);
    utimesSync(path.join(tmp, "old"), anHourAgo, anHourAgo);
    await store.sweepTemporary(60_000);
    expect(readdirSync(tmp)).toEqual(["fresh"]);
  });
});
