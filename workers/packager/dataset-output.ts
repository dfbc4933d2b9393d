import { createHash } from "node:crypto";
import { once } from "node:events";
import { PassThrough, type Readable } from "node:stream";
import { createGzip } from "node:zlib";
import type { BlobStore } from "@/lib/blob";
import type { DatasetOptions, SplitName } from "@/lib/contracts/dataset-options";
import type { StoredFile } from "@/lib/services/dataset-jobs";
import { ParquetFile } from "./parquet-file";

/**
 * gzip level 1: chat text still shrinks about 4× and it keeps up with the COPY (level 6 is
 * about three times slower for a few percent less).
 */
const GZIP_LEVEL = 1;
/** Lines are copied into batches of this size, one write each. */
const BATCH_BYTES = 256 * 1024;
const NEWLINE = Buffer.from("\n");

/**
 * U+2028 and U+2029 (E2 80 A8/A9) and U+0085 (C2 85) are valid unescaped in JSON strings, and
 * Postgres leaves them so, but Python's str.splitlines() and other line readers break a line at
 * them, and the JSONL line then reads as two broken halves.
 */
function hasLineSeparator(data: Buffer, start: number, end: number): boolean {
  const line = data.subarray(start, end);
  for (let i = line.indexOf(0xe2); i >= 0 && i + 2 < line.length; i = line.indexOf(0xe2, i + 1))
    if (line[i + 1] === 0x80 && (line[i + 2] === 0xa8 || line[i + 2] === 0xa9)) return true;
  for (let i = line.indexOf(0xc2); i >= 0 && i + 1 < line.length; i = line.indexOf(0xc2, i + 1))
    if (line[i + 1] === 0x85) return true;
  return false;
}

/** The line with those characters written as JSON escapes (they only occur inside strings). */
function escapeLineSeparators(line: Buffer): Buffer {
  const escape = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
  return Buffer.from(line.toString("utf8").replace(/[\u2028\u2029\u0085]/g, escape));
}

/** What one file of a dataset is called: `<name>[-<split>].jsonl[.gz]` or `.parquet`. */
export function datasetFileName(name: string, options: DatasetOptions, split: SplitName | null): string {
  const extension = options.format === "parquet" ? "parquet" : options.compression === "gzip" ? "jsonl.gz" : "jsonl";
  return `${name}${split ? `-${split}` : ""}.${extension}`;
}

const CONTENT_TYPES = {
  parquet: "application/vnd.apache.parquet",
  gzip: "application/gzip",
  jsonl: "application/x-ndjson",
};

/**
 * One file of a dataset being written to the blob store under `key` as rows arrive: JSONL lines
 * (gzipped or not), or for Parquet the rows' JSON lines into scratch files that become the
 * Parquet file (parquet-file.ts), uploaded at the end. Bytes are counted and hashed (SHA-256) as they leave, after
 * compression, so `bytes` and `checksum` describe the stored file. Writes wait while the blob
 * store is behind (backpressure): memory stays bounded.
 */
export class DatasetOutput {
  private readonly input = new PassThrough({ highWaterMark: 1024 * 1024 });
  private readonly stored: Promise<void>;
  private readonly parquet: ParquetFile | undefined;
  private batch = Buffer.allocUnsafe(BATCH_BYTES);
  private batchBytes = 0;
  private bytes = 0;
  private samples = 0;
  private readonly hash = createHash("sha256");

  constructor(
    blobs: BlobStore,
    private readonly file: { key: string; name: string; split: SplitName | null },
    options: DatasetOptions,
    private readonly signal: AbortSignal,
    /** Where a Parquet file's scratch files go (the worker's DATA_DIR/tmp). */
    scratchDir: string,
  ) {
    const gzip = options.format === "jsonl" && options.compression === "gzip";
    const body: Readable = gzip ? this.input.pipe(createGzip({ level: GZIP_LEVEL })) : this.input;
    const contentType = CONTENT_TYPES[options.format === "parquet" ? "parquet" : gzip ? "gzip" : "jsonl"];
    this.stored = blobs.put(file.key, this.counted(body), { signal, contentType });
    // A failed upload must not leave writers waiting for 'drain': they see it through `stored`.
    this.stored.catch(() => this.input.destroy());
    this.parquet = options.format === "parquet" ? new ParquetFile(scratchDir, signal) : undefined;
  }

  /**
   * One sample: its line, `data[start, end)` (without the newline), copied into the batch. A
   * promise to await only when the batch went out (a line usually just joins the batch: no
   * promise, no microtask, no buffer per sample).
   */
  add(data: Buffer, start: number, end: number): Promise<void> | undefined {
    this.samples++;
    if (!this.parquet && hasLineSeparator(data, start, end)) {
      data = escapeLineSeparators(data.subarray(start, end));
      start = 0;
      end = data.length;
    }
    if (this.batchBytes + (end - start) + 1 > this.batch.length) return this.addAfterFlush(data, start, end);
    this.append(data, start, end);
    return undefined;
  }

  private async addAfterFlush(data: Buffer, start: number, end: number): Promise<void> {
    await this.flushBatch();
    // A line longer than a batch goes out on its own.
    if (end - start + 1 > this.batch.length) await this.write(Buffer.concat([data.subarray(start, end), NEWLINE]));
    else this.append(data, start, end);
  }

  /** Copies a line and its newline into the batch, which has room for them. */
  private append(data: Buffer, start: number, end: number): void {
    this.batchBytes += data.copy(this.batch, this.batchBytes, start, end);
    this.batch[this.batchBytes++] = 0x0a;
  }

  async finish(): Promise<StoredFile> {
    await this.flushBatch();
    if (this.parquet) {
      for await (const chunk of await this.parquet.finish()) await this.send(chunk);
      this.parquet.remove();
    }
    this.input.end();
    await this.stored;
    const { key, name, split } = this.file;
    return {
      key,
      name,
      split,
      samples: this.samples,
      bytes: this.bytes,
      checksum: `sha256:${this.hash.digest("hex")}`,
    };
  }

  /** Resolves once the upload has ended, whichever way (after an abort: nothing left behind). */
  settled(): Promise<void> {
    this.parquet?.remove();
    return this.stored.then(
      () => {},
      () => {},
    );
  }

  private async flushBatch(): Promise<void> {
    if (this.batchBytes === 0) return;
    const chunk = this.batch.subarray(0, this.batchBytes);
    this.batch = Buffer.allocUnsafe(BATCH_BYTES);
    this.batchBytes = 0;
    await this.write(chunk);
  }

  private async write(chunk: Buffer): Promise<void> {
    if (this.parquet) return this.parquet.write(chunk);
    return this.send(chunk);
  }

  /** Bytes of the stored file (before gzip when gzipped). */
  private async send(chunk: Buffer): Promise<void> {
    if (this.input.write(chunk)) return;
    await Promise.race([once(this.input, "drain"), this.stored]);
  }

  private async *counted(body: Readable): AsyncGenerator<Buffer> {
    for await (const chunk of body) {
      const b = chunk as Buffer;
      this.hash.update(b);
      this.bytes += b.length;
      yield b;
    }
  }
}
