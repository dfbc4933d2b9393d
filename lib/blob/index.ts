import { env } from "../env";
import type { BlobStore } from "./blob-store";
import { LocalBlobStore } from "./local-blob-store";
import type { S3Options } from "./s3-blob-store";

export type { BlobStore, PutOptions, SignedDownload } from "./blob-store";
export { contentTypeOf } from "./blob-store";
export { LocalBlobStore } from "./local-blob-store";

let cached: BlobStore | undefined;

/** The blob store this process's configuration names (BLOB_DRIVER). */
export function blobStore(): BlobStore {
  if (cached) return cached;
  const e = env();
  cached =
    e.BLOB_DRIVER === "s3"
      ? lazyS3BlobStore({
          bucket: e.S3_BUCKET!,
          region: e.S3_REGION,
          endpoint: e.S3_ENDPOINT,
          forcePathStyle: e.S3_FORCE_PATH_STYLE,
          accessKeyId: e.S3_ACCESS_KEY_ID,
          secretAccessKey: e.S3_SECRET_ACCESS_KEY,
        })
      : new LocalBlobStore(e.BLOB_DIR, e.BLOB_MIN_FREE_BYTES);
  return cached;
}

/**
 * An S3BlobStore whose module, and with it the AWS SDK (about 10 MB of a worker's resident
 * memory), loads on the store's first use: a process on the local driver, the embedded default,
 * never loads them.
 */
export function lazyS3BlobStore(options: S3Options): BlobStore {
  let store: Promise<BlobStore> | undefined;
  const s3 = () => (store ??= import("./s3-blob-store").then((m) => new m.S3BlobStore(options)));
  return {
    put: async (key, body, o) => (await s3()).put(key, body, o),
    read: async function* (key, o) {
      yield* (await s3()).read(key, o);
    },
    removePrefix: async (prefix) => (await s3()).removePrefix(prefix),
    downloadUrl: async (key, o) => (await s3()).downloadUrl(key, o),
  };
}
