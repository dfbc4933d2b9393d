/**
 * Where dataset files live. Rows store keys (`datasets/<id>/<attempt>/<name>.jsonl`), never URLs: a
 * download URL is signed when someone asks for it. Two drivers: a local folder (default; the app
 * serves its files through signed URLs) and S3 or any S3-compatible endpoint.
 */
export interface BlobStore {
  /**
   * Writes `body` under `key`, atomically: until it resolves, readers see no object at `key`
   * (local: a temporary file renamed into place; S3: an upload completed in one request).
   * Aborting `signal` or a failing `body` leaves nothing behind under `key`.
   */
  put(key: string, body: AsyncIterable<Uint8Array>, options?: PutOptions): Promise<void>;
  /** The object's bytes from byte `start` (default 0) to its end; fails when there is no such object. */
  read(key: string, options?: { start?: number }): AsyncIterable<Uint8Array>;
  /** Removes every object whose key starts with `prefix` (no error when there is none). */
  removePrefix(prefix: string): Promise<void>;
  /** A URL that downloads the object with no other credential, until `expiresAt`. */
  downloadUrl(key: string, options: { ttlSeconds: number; filename?: string }): Promise<SignedDownload>;
}

export type SignedDownload = { url: string; expiresAt: Date };

/** `contentType` defaults to JSONL's (application/x-ndjson). */
export type PutOptions = { signal?: AbortSignal; contentType?: string };

/** The content type a dataset file is served with, from its name (the local driver keeps none). */
export function contentTypeOf(key: string): string {
  if (key.endsWith(".parquet")) return "application/vnd.apache.parquet";
  if (key.endsWith(".gz")) return "application/gzip";
  return "application/x-ndjson";
}

/** Keys are slash-separated segments of safe characters: no `..`, no absolute paths. */
const KEY = /^[A-Za-z0-9_-][A-Za-z0-9._-]*(\/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$/;

export function assertValidKey(key: string): void {
  if (!KEY.test(key) || key.length > 512) throw new Error(`invalid blob key: ${JSON.stringify(key)}`);
}
