import { createHash, randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startS3Server } from "../../tests/helpers/s3-server";
import { lazyS3BlobStore } from "./index";
import { S3BlobStore } from "./s3-blob-store";

// Against a real S3-compatible server (s3rver on a loopback port), not a mock.
let s3: Awaited<ReturnType<typeof startS3Server>>;
let store: S3BlobStore;

beforeAll(async () => {
  s3 = await startS3Server();
  // The smallest part S3 allows, so a 12 MiB file is a three-part multipart upload.
  store = new S3BlobStore({ ...s3.options, partSizeBytes: 5 * 1024 * 1024 });
});
afterAll(async () => {
  store?.client.destroy();
  await s3?.stop();
});

async function* chunks(data: Buffer, size: number): AsyncGenerator<Buffer> {
  for (let i = 0; i < data.length; i += size) yield data.subarray(i, i + size);
}

const sha = (b: Buffer | ArrayBuffer) =>
  createHash("sha256")
    .update(Buffer.from(b as ArrayBuffer))
    .digest("hex");

describe("S3BlobStore", () => {
  it("uploads a small file and serves it through a presigned, expiring URL", async () => {
    const data = Buffer.from('{"messages": []}\n'.repeat(10));
    await store.put("datasets/d1/a/small.jsonl", chunks(data, 7));
    const { url, expiresAt } = await store.downloadUrl("datasets/d1/a/small.jsonl", {
      ttlSeconds: 60,
      filename: "small.jsonl",
    });
    expect(url).toContain("X-Amz-Signature=");
    expect(expiresAt.getTime() - Date.now()).toBeGreaterThan(55_000);
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-disposition")).toBe('attachment; filename="small.jsonl"');
    expect(Buffer.from(await res.arrayBuffer()).equals(data)).toBe(true);
    // (Whether a tampered signature is refused is the server's business, not the driver's.)
    expect(new URL(url).searchParams.get("X-Amz-Expires")).toBe("60");
  });

  it("uploads a large file in parts and reads it back byte for byte", async () => {
    const data = randomBytes(12 * 1024 * 1024 + 123);
    await store.put("datasets/d2/a/large.jsonl", chunks(data, 64 * 1024));
    const res = await fetch((await store.downloadUrl("datasets/d2/a/large.jsonl", { ttlSeconds: 60 })).url);
    expect(res.status).toBe(200);
    expect(sha(await res.arrayBuffer())).toBe(sha(data));
  });

  it("publishes nothing when the body fails or the upload is aborted", async () => {
    async function* failing(): AsyncGenerator<Buffer> {
      yield randomBytes(6 * 1024 * 1024);
      throw new Error("database went away");
    }
    await expect(store.put("datasets/d3/a/broken.jsonl", failing())).rejects.toThrow();
    const abort = new AbortController();
    async function* slow(): AsyncGenerator<Buffer> {
      yield randomBytes(1024);
      abort.abort();
      yield randomBytes(1024);
    }
    await expect(store.put("datasets/d3/b/aborted.jsonl", slow(), { signal: abort.signal })).rejects.toThrow();
    for (const key of ["datasets/d3/a/broken.jsonl", "datasets/d3/b/aborted.jsonl"]) {
      expect((await fetch((await store.downloadUrl(key, { ttlSeconds: 60 })).url)).status, key).toBe(404);
    }
  });

  it("removes every object under a prefix and nothing else", async () => {
    await store.put("datasets/d4/a/x.jsonl", chunks(Buffer.from("x"), 1));
    await store.put("datasets/d4/b/y.jsonl", chunks(Buffer.from("y"), 1));
    await store.put("datasets/d40/a/z.jsonl", chunks(Buffer.from("z"), 1));
    await store.removePrefix("datasets/d4/");
    const status = async (key: string) => (await fetch((await store.downloadUrl(key, { ttlSeconds: 60 })).url)).status;
    expect(await status("datasets/d4/a/x.jsonl")).toBe(404);
    expect(await status("datasets/d4/b/y.jsonl")).toBe(404);
    expect(await status("datasets/d40/a/z.jsonl")).toBe(200);
    await store.removePrefix("datasets/none/");
  });

  it("refuses keys that could escape their folder", async () => {
    await expect(store.put("../x", chunks(Buffer.from("x"), 1))).rejects.toThrow(/invalid blob key/);
    await expect(store.downloadUrl("/abs", { ttlSeconds: 1 })).rejects.toThrow(/invalid blob key/);
  });

  it("works the same through the store a process makes for BLOB_DRIVER=s3, which loads the SDK on first use", async () => {
    const lazy = lazyS3BlobStore(s3.options);
    const data = Buffer.from('{"messages": [{"role": "user", "content": "hi"}]}\n'.repeat(3));
    await lazy.put("datasets/d9/a/lazy.jsonl", chunks(data, 11));
    const read: Buffer[] = [];
    for await (const c of lazy.read("datasets/d9/a/lazy.jsonl", { start: 5 })) read.push(Buffer.from(c));
    expect(Buffer.concat(read).equals(data.subarray(5))).toBe(true);
    const res = await fetch((await lazy.downloadUrl("datasets/d9/a/lazy.jsonl", { ttlSeconds: 60 })).url);
    expect(Buffer.from(await res.arrayBuffer()).equals(data)).toBe(true);
    await lazy.removePrefix("datasets/d9/");
    await expect(async () => {
      for await (const _ of store.read("datasets/d9/a/lazy.jsonl")) void _;
    }).rejects.toThrow();
  });
});
