import { ApiError } from "../errors";
import { randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, open, readdir, rename, rm, stat, statfs } from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { signedUrl } from "../signing";
import { assertValidKey, type BlobStore, type PutOptions } from "./blob-store";

/** The app route that serves local blobs (app/v1/blobs/[...key]/route.ts). */
export const LOCAL_BLOB_ROUTE = "/v1/blobs/";

const WRITE_BUFFER_BYTES = 4 * 1024 * 1024;

/**
 * Blobs as files under `root`. A put writes `root/.tmp/<uuid>`, fsyncs it and renames it to
 * its key: rename is atomic within one file system, so a reader (or a crash) never sees a
 * partial file under a key. A killed writer leaves only its temporary file, which
 * `sweepTemporary` removes. Folders are made 0700 and files 0600: every team's samples are in
 * them (before, 0755 and 0644: any local user could read them).
 */
export class LocalBlobStore implements BlobStore {
  /** @param minFreeBytes what a write leaves free on the disk (BLOB_MIN_FREE_BYTES); 0: no check. */
  constructor(
    readonly root: string,
    private readonly minFreeBytes = 0,
  ) {}

  pathOf(key: string): string {
    assertValidKey(key);
    return path.join(this.root, ...key.split("/"));
  }

  async put(key: string, body: AsyncIterable<Uint8Array>, options: PutOptions = {}): Promise<void> {
    const target = this.pathOf(key);
    const tmpDir = path.join(this.root, ".tmp");
    await mkdir(tmpDir, { recursive: true, mode: 0o700 });
    const tmp = path.join(tmpDir, randomUUID());
    try {
      // A deep write buffer lets the source (a COPY from Postgres) keep flowing while the disk
      // catches up, instead of pausing at every 16 kB chunk until the write returns.
      const source = this.minFreeBytes > 0 ? this.withinFreeSpace(body, tmpDir) : body;
      await pipeline(
        Readable.from(source),
        createWriteStream(tmp, { highWaterMark: WRITE_BUFFER_BYTES, mode: 0o600 }),
        {
          signal: options.signal,
        },
      );
      // Durable before it becomes visible: a crash after the rename must not leave a short file.
      const file = await open(tmp, "r+");
      try {
        await file.sync();
      } finally {
        await file.close();
      }
      await mkdir(path.dirname(target), { recursive: true, mode: 0o700 });
      await rename(tmp, target);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
  }

  /**
   * `body`, checking the disk's free space before its first bytes and every FREE_CHECK_BYTES: a
   * write that would leave less than minFreeBytes stops with a 507. Before, an upload of a team
   * (up to 1 GiB an import, ten at a time) could fill the disk the embedded database writes its
   * WAL to, and the database stopped the whole service.
   */
  private async *withinFreeSpace(body: AsyncIterable<Uint8Array>, dir: string): AsyncGenerator<Uint8Array> {
    let sinceCheck = Infinity;
    for await (const chunk of body) {
      if (sinceCheck >= FREE_CHECK_BYTES) {
        const fs = await statfs(dir);
        const free = fs.bavail * fs.bsize;
        if (free - FREE_CHECK_BYTES < this.minFreeBytes)
          throw new ApiError(
            507,
            "internal",
            `The server's disk is nearly full (${gib(free)} free, and ${gib(this.minFreeBytes)} are kept free for the ` +
              "database and the system: BLOB_MIN_FREE_BYTES): the file was not stored. The operator can free space.",
          );
        sinceCheck = 0;
      }
      sinceCheck += chunk.byteLength;
      yield chunk;
    }
  }

  read(key: string, options: { start?: number } = {}): AsyncIterable<Uint8Array> {
    return createReadStream(this.pathOf(key), { start: options.start ?? 0, highWaterMark: 1024 * 1024 });
  }

  async removePrefix(prefix: string): Promise<void> {
    // Dataset prefixes are folders ("datasets/<id>/"); a bare key prefix is removed as a file.
    const trimmed = prefix.replace(/\/+$/, "");
    await rm(this.pathOf(trimmed), { recursive: true, force: true });
  }

  async downloadUrl(key: string, options: { ttlSeconds: number }) {
    assertValidKey(key);
    const now = Date.now();
    const url = signedUrl(LOCAL_BLOB_ROUTE + key, options.ttlSeconds, now);
    return { url, expiresAt: new Date((Math.floor(now / 1000) + options.ttlSeconds) * 1000) };
  }

  /** The file behind a key, for the serving route; undefined when there is none. */
  async open(
    key: string,
  ): Promise<
    { size: number; stream: (range?: { start: number; end: number }) => ReadableStream<Uint8Array> } | undefined
  > {
    const file = this.pathOf(key);
    const info = await stat(file).catch(() => undefined);
    if (!info?.isFile()) return undefined;
    return {
      size: info.size,
      // `end` inclusive, as HTTP's byte ranges and createReadStream count it.
      stream: (range) => Readable.toWeb(createReadStream(file, range)) as ReadableStream<Uint8Array>,
    };
  }

  /** Removes temporary files older than `olderThanMs` (left by writers that were killed). */
  async sweepTemporary(olderThanMs: number): Promise<void> {
    const tmpDir = path.join(this.root, ".tmp");
    const names = await readdir(tmpDir).catch(() => [] as string[]);
    const cutoff = Date.now() - olderThanMs;
    for (const name of names) {
      const file = path.join(tmpDir, name);
      const info = await stat(file).catch(() => undefined);
      if (info && info.mtimeMs < cutoff) await rm(file, { force: true });
    }
  }
}

/** Bytes written between two checks of the disk's free space. */
const FREE_CHECK_BYTES = 64 * 1024 * 1024;
const gib = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(1)} GiB`;
