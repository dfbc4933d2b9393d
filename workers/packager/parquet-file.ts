import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { createReadStream, createWriteStream, rmSync, type WriteStream } from "node:fs";
import { mkdir, readdir, rm, stat } from "node:fs/promises";
import path from "node:path";
import { finished } from "node:stream/promises";
import type { DuckDBConnection, DuckDBInstance } from "@duckdb/node-api";
import { PackagingError } from "./errors";
import { joinedParquetFooter, PARQUET_MAGIC, readParquetPart, type ParquetPart } from "./parquet-concat";

/**
 * What the packager's COPY renders for one Parquet row (lib/services/dataset-jobs.ts): a JSON
 * object per line, `{"f": [id, userId, groupId, metadata (its JSON text, as a string), tools (the
 * same)],
 * "createdAt": "2026-11-25 22:55:35.191145+00" (Postgres's text of the timestamp, in UTC),
 * "messages": [...]}`.
 */
const TOOL_CALL = "STRUCT(id VARCHAR, type VARCHAR, function STRUCT(name VARCHAR, arguments VARCHAR))";
/**
 * `tool_calls` is a list of structs, as OpenAI's messages have them: chat templates (and TRL's
 * SFTTrainer through them) loop over a message's tool calls, and over JSON text they looped over
 * its characters.
 */
const COLUMNS =
  "{f: 'VARCHAR[]', createdAt: 'TIMESTAMPTZ', " +
  `messages: 'STRUCT(role VARCHAR, content VARCHAR, name VARCHAR, tool_call_id VARCHAR, tool_calls ${TOOL_CALL}[], weight INTEGER)[]'}`;

/**
 * Rows per row group (DuckDB rounds up to its vectors of 2,048). Measured on 200,000
 * three-message samples: its default of 122,880 rows added about 100 MB to the worker's peak,
 * 10,240 about 60 MB and was slightly faster; groups are then about 2 MB.
 */
const ROW_GROUP_ROWS = 10_000;
/**
 * DuckDB's memory cap, per part. Its JSON reader's buffer holds two of its largest record size
 * (16 MB by default, above the largest sample a 16 MB batch add can store: a larger record fails
 * the dataset with DuckDB's reason; it cannot be set lower), 32 MB in all; the row group being
 * written takes the rest, spilling to the scratch folder if it must. 64 MB fails on parts of
 * 3 MB samples; 96 MB converts them, and a 15 MB one.
 */
const DUCKDB_MEMORY = "96MB";

/**
 * Bytes of JSON lines per part: a part is converted while the next one is written, all by one
 * DuckDB instance whose buffer pool is emptied after each part (left as it is, it kept about
 * 80 MB of what it used). Measured with 1M three-message samples (about 345 MB of lines): parts
 * of 16 MB kept the worker's peak at 245–286 MB in eight runs (32 MB parts: 350–380 MB); what is
 * left to convert once the rows have all arrived is then a part or two. The conversions are the
 * Parquet file's critical path (about 100 ms a part alone, 100–270 ms beside Postgres and the
 * packager): an instance made and closed for each part cost about 20 ms more per part, and about
 * 12 ms of the packager's thread (the instance's setup and its synchronous close); with one
 * instance a Parquet file of 1M samples took 3.5–4.1 s against 4.8–4.9 s (alternating in one run).
 */
const PART_BYTES = 16 * 1024 * 1024;

interface Part {
  path: string;
  lines: WriteStream;
  bytes: number;
}

/**
 * A dataset's Parquet file. The rows' JSON lines go to scratch files of about 16 MB ("parts") as
 * they arrive, at the speed of a plain JSONL export; each full part is converted by DuckDB in one
 * native pass (JSON reading, Snappy pages) into a Parquet file of its own, on one thread with its
 * memory capped, while the next part is written; at the end the parts' row groups are joined
 * into one file without being decoded again (parquet-concat.ts). Measured on 1M three-message
 * samples: the conversion takes about 1.6 s of one core in all, against about 14 s for the
 * JavaScript writer it replaced (hyparquet-writer), and now mostly overlaps the COPY. The schema:
 * `id`, `createdAt` (TIMESTAMP, UTC, µs), `userId`, `groupId`, `metadata` (JSON text), `messages`
 * (LIST of `{role, content, name, tool_call_id, tool_calls, weight}`, tool_calls a LIST of
 * `{id, type, function: {name, arguments}}`), `tools` (JSON text: a tool's parameters are any
 * JSON Schema); every column is nullable, as DuckDB writes them.
 */
export class ParquetFile {
  private readonly dir: string;
  private made: Promise<void> | undefined;
  private part: Part | undefined;
  /** The Parquet files of the parts closed so far, in order. */
  private readonly outputs: string[] = [];
  /** The conversions, one after the other; never rejects (a failure lands in `failure`). */
  private converted: Promise<void> = Promise.resolve();
  private failure: { error: unknown } | undefined;
  /** The DuckDB instance that converts the parts, one after the other. */
  private instance: DuckDBInstance | undefined;
  /** A conversion is under way (it closes the instance itself if removed meanwhile). */
  private busy = false;
  /** The connection converting a part now (remove() interrupts it). */
  private converting: DuckDBConnection | undefined;
  private removed = false;

  /**
   * Nothing is created before the first write or finish(), so a failure shows there. An abort
   * interrupts the conversion under way.
   */
  constructor(
    scratchDir: string,
    private readonly signal: AbortSignal,
    /** Bytes of lines per part (tests make it small to join many). */
    private readonly partBytes = PART_BYTES,
  ) {
    // sweepParquetScratch knows these folders by their prefix.
    this.dir = path.join(scratchDir, `parquet-${randomUUID()}`);
  }

  /**
   * JSON lines, in chunks cut anywhere; waits while the disk is behind. Throws a conversion's
   * failure as soon as it is known.
   */
  async write(chunk: Buffer): Promise<void> {
    if (this.failure) throw this.failure.error;
    let part = await this.openPart();
    if (part.bytes + chunk.length >= this.partBytes) {
      // The part is full: it ends with this chunk's last whole line.
      const end = chunk.lastIndexOf(0x0a) + 1;
      if (end > 0) {
        await append(part, chunk.subarray(0, end));
        this.closePart();
        if (end === chunk.length) return;
        chunk = chunk.subarray(end);
        part = await this.openPart();
      }
    }
    await append(part, chunk);
  }

  private async openPart(): Promise<Part> {
    if (this.part) return this.part;
    this.made ??= mkdir(this.dir, { recursive: true }).then(() => {});
    await this.made;
    if (this.removed) {
      // remove() ran while the folder was being made: it is gone again, with nothing in it.
      await rm(this.dir, { recursive: true, force: true });
      throw new Error("the Parquet file was removed");
    }
    if (this.part) return this.part; // another write opened it meanwhile
    const file = path.join(this.dir, `part-${this.outputs.length}.jsonl`);
    const lines = createWriteStream(file, { highWaterMark: 1024 * 1024 });
    // A failed write (disk full) surfaces through write() and finish(), not as an unhandled 'error'.
    lines.on("error", () => {});
    this.part = { path: file, lines, bytes: 0 };
    return this.part;
  }

  /** Ends the part being written and queues its conversion. */
  private closePart(): void {
    const part = this.part!;
    this.part = undefined;
    const target = path.join(this.dir, `part-${this.outputs.length}.parquet`);
    this.outputs.push(target);
    part.lines.end();
    this.converted = this.converted
      .then(async () => {
        await finished(part.lines);
        if (this.failure) return;
        await this.convert(part.path, target);
        rmSync(part.path, { force: true });
      })
      .catch((error: unknown) => {
        this.failure ??= { error };
      });
  }

  /**
   * One part's conversion, by the file's DuckDB instance (made for the first part, closed by
   * finish() or remove()), whose buffer pool is emptied after each part (PART_BYTES says why).
   */
  private async convert(source: string, target: string): Promise<void> {
    this.signal.throwIfAborted();
    if (this.removed) throw new Error("the Parquet file was removed");
    this.busy = true;
    let keep = true; // the instance, for the next part
    try {
      // DuckDB's module (and its native library) loads with a worker's first Parquet file.
      const { DuckDBInstance } = await import("@duckdb/node-api");
      this.instance ??= await DuckDBInstance.create(":memory:", {
        threads: "1",
        memory_limit: DUCKDB_MEMORY,
        temp_directory: path.join(this.dir, "spill"),
      });
      const connection = await this.instance.connect();
      this.converting = connection;
      const interrupt = () => connection.interrupt();
      this.signal.addEventListener("abort", interrupt, { once: true });
      try {
        await run(
          connection,
          `
          copy (
            select f[1] as id, createdAt, f[2] as userId, f[3] as groupId, f[4] as metadata, messages, f[5] as tools
            from read_json(${literal(source)}, format = 'newline_delimited', columns = ${COLUMNS})
          ) to ${literal(target)} (format parquet, compression snappy, row_group_size ${ROW_GROUP_ROWS})`,
          this.signal,
        );
        keep = await emptyBufferPool(connection).then(
          () => true,
          () => false, // the next part gets a new one
        );
      } finally {
        this.signal.removeEventListener("abort", interrupt);
        this.converting = undefined;
        connection.closeSync();
      }
    } finally {
      this.busy = false;
      if (this.removed || !keep) this.closeInstance();
    }
  }

  private closeInstance(): void {
    this.instance?.closeSync();
    this.instance = undefined;
  }

  /**
   * Converts what is left and joins the parts: resolves to the Parquet file's bytes, in order
   * (read from the scratch files as they are consumed; remove() after them).
   */
  async finish(): Promise<AsyncIterable<Buffer>> {
    if (this.part || !this.outputs.length) {
      await this.openPart(); // an empty selection still makes a file, with no rows
      this.closePart();
    }
    await this.converted;
    this.closeInstance();
    this.signal.throwIfAborted();
    if (this.failure) throw this.failure.error;
    const parts = await Promise.all(this.outputs.map((file) => readParquetPart(file)));
    return joinedParquetBytes(parts);
  }

  /** Removes the scratch files (after finish(), or after a failure); never throws. */
  remove(): void {
    this.removed = true;
    this.part?.lines.destroy();
    this.part = undefined;
    // A conversion under way fails (it was interrupted, or its folder is gone) and closes its DuckDB.
    this.converting?.interrupt();
    if (!this.busy) this.closeInstance();
    try {
      rmSync(this.dir, { recursive: true, force: true });
    } catch {
      // Nothing was made there (its parent is not a folder): nothing to remove. It runs on the
      // failure path too, where it must not replace the error that got there.
    }
  }
}

/** The magic, each part's row groups as they lie in its file, then the joined footer. */
async function* joinedParquetBytes(parts: ParquetPart[]): AsyncGenerator<Buffer> {
  const footer = joinedParquetFooter(parts);
  yield PARQUET_MAGIC;
  for (const part of parts) {
    if (part.bodyEnd <= 4) continue; // no rows
    const body = createReadStream(part.file, { start: 4, end: part.bodyEnd - 1, highWaterMark: 1024 * 1024 });
    for await (const chunk of body) yield chunk as Buffer;
  }
  yield footer;
}

/** Writes to a part's scratch file, waiting while the disk is behind. */
async function append(part: Part, chunk: Buffer): Promise<void> {
  if (part.lines.errored) throw part.lines.errored;
  part.bytes += chunk.length;
  // once() rejects if the stream fails meanwhile.
  if (!part.lines.write(chunk)) await once(part.lines, "drain");
}

/**
 * Removes the scratch folders of Parquet files whose writer died (a killed worker): those in
 * which nothing was written for `olderThanMs` (a live one writes its lines, then its Parquet file,
 * continuously).
 */
export async function sweepParquetScratch(scratchDir: string, olderThanMs: number): Promise<void> {
  const cutoff = Date.now() - olderThanMs;
  const names = await readdir(scratchDir).catch(() => [] as string[]);
  for (const name of names.filter((n) => n.startsWith("parquet-"))) {
    const dir = path.join(scratchDir, name);
    const entries = await readdir(dir, { recursive: true }).catch(() => [] as string[]);
    const times = await Promise.all(
      ["", ...entries].map((e) =>
        stat(path.join(dir, e)).then(
          (s) => s.mtimeMs,
          () => 0,
        ),
      ),
    );
    if (Math.max(...times) < cutoff) await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Runs a statement; an interrupted one rejects with the abort's reason, a failed one with a
 * PackagingError that says why (DuckDB's first line, without our scratch paths).
 */
async function run(connection: DuckDBConnection, statement: string, signal: AbortSignal): Promise<void> {
  try {
    await connection.run(statement);
  } catch (err) {
    signal.throwIfAborted();
    const reason = String((err as Error).message ?? err)
      .split("\n")[0]!
      .replaceAll(/'[^']*'/g, "the file");
    throw new PackagingError(`Could not write the Parquet file: ${reason}`, { cause: err });
  }
}

/**
 * Lowers the instance's memory limit to 1 MB and back: DuckDB then evicts what its buffer pool
 * kept of the last part (about 80 MB otherwise, held until the instance is closed). Rejects where
 * it cannot (something still pinned).
 */
async function emptyBufferPool(connection: DuckDBConnection): Promise<void> {
  await connection.run("set memory_limit = '1MB'");
  await connection.run(`set memory_limit = '${DUCKDB_MEMORY}'`);
}

/** A SQL string literal (the paths are ours, but a directory may hold a quote). */
const literal = (s: string) => `'${s.replaceAll("'", "''")}'`;
