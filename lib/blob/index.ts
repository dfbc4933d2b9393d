import { env } from "../env";
import type { BlobStore } from "./blob-store";
import { LocalBlobStore } from "./local-blob-store";
import { S3BlobStore } from "./s3-blob-store";

export type { BlobStore, PutOptions, SignedDownload } from "./blob-store";
export { contentTypeOf } from "./blob-store";
export { LocalBlobStore } from "./local-blob-store";
export { S3BlobStore } from "./s3-blob-store";

let cached: BlobStore | undefined;

/** The blob store this process's configuration names (BLOB_DRIVER). */
export function blobStore(): BlobStore {
  if (cached) return cached;
  const e = env();
  cached =
    e.BLOB_DRIVER === "s3"
      ? new S3BlobStore({
          bucket: e.S3_BUCKET!,
          region: e.S3_REGION,
          endpoint: e.S3_ENDPOINT,
          forcePathStyle: e.S3_FORCE_PATH_STYLE,
          accessKeyId: e.S3_ACCESS_KEY_ID,
          secretAccessKey: e.S3_SECRET_ACCESS_KEY,
        })
      : new LocalBlobStore(e.BLOB_DIR);
  return cached;
}
