import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { DuckDBConnection, DuckDBInstance } from "@duckdb/node-api";
import { parquetMetadata, parquetReadObjects } from "hyparquet";
import { afterAll, describe, expect, it, vi } from "vitest";
import { ParquetFile, sweepParquetScratch } from "./parquet-file";

const root = mkdtempSync(path.join(os.tmpdir(), "lmp-parquet-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
/** A scratch directory of each test's own. */
const scratchDir = () => mkdtempSync(path.join(root, "t-"));

const live = () => new AbortController().signal;

/** The file's bytes, as finish() gives them, for hyparquet. */
async function bytesOf(file: ParquetFile): Promise<ArrayBuffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of await file.finish()) chunks.push(chunk);
  const b = Buffer.concat(chunks);
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.length) as ArrayBuffer;
}

const call = { id: "c1", type: "function", function: { name: "f", arguments: '{"x":1}' } };

/** A sample's record: what the Parquet file holds. */
const record = (i: number) => ({
  id: `smp_${i}`,
  createdAt: 1_700_000_000_000_000 + i * 10_007, // some without a fraction of a second
  userId: i % 3 ? `u${i % 7}` : null,
  // One value per 10,000 records: a lookup finds its row groups by their statistics and bloom filters.
  groupId: i % 4 ? `g${Math.floor(i / 10_000)}` : null,
  metadata: i % 2 ? JSON.stringify({ n: String(i), nested: { t: "a\tb" } }) : null,
  messages: [
    { role: "user", content: `question ${i} é\n\t"quoted"`, extra: "ignored" },
    i % 5 ? { role: "assistant", content: `answer ${i}` } : { role: "assistant", content: null, tool_calls: [call] },
    ...(i % 5 ? [] : [{ role: "tool", content: "r", tool_call_id: "c1", name: "f" }]),
  ],
});

/**
 * The line the packager's COPY renders for a record (lib/services/dataset-jobs.ts): the strings in
 * `f`, the time as Postgres writes a timestamptz in UTC (the fraction's trailing zeros dropped).
 */
const line = (r: ReturnType<typeof record>) =>
  JSON.stringify({ f: [r.id, r.userId, r.groupId, r.metadata], createdAt: pgTime(r.createdAt), messages: r.messages }) +
  "\n";

function pgTime(us: number): string {
  const iso = new Date(Math.floor(us / 1000)).toISOString();
  const fraction = String(us % 1_000_000)
    .padStart(6, "0")
    .replace(/0+$/, "");
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)}${fraction ? `.${fraction}` : ""}+00`;
}

describe("ParquetFile", () => {
  it("converts the records in parts and joins them, in order, as an independent reader reads them", async () => {
    const scratch = scratchDir();
    // Parts of 1 MB: about 5,000 records each, so the file joins 9 of them.
    const file = new ParquetFile(scratch, live(), 1024 * 1024);
    const total = 45_000;
    // Lines arrive in chunks cut anywhere, as COPY chunks are.
    const text = Buffer.from(Array.from({ length: total }, (_, i) => line(record(i))).join(""));
    for (let at = 0; at < text.length; at += 70_001) await file.write(text.subarray(at, at + 70_001));
    const bytes = await bytesOf(file);
    // Groups of at most about 10,000 rows (DuckDB rounds to its vectors of 2,048): memory holds
    // about one at a time. Here each part's records make one or two groups.
    const groups = parquetMetadata(bytes).row_groups.map((g) => Number(g.num_rows));
    expect(groups.length).toBeGreaterThanOrEqual(9);
    for (const n of groups) expect(n).toBeLessThanOrEqual(10_240);
    expect(groups.reduce((a, b) => a + b)).toBe(total);
    const rows = await parquetReadObjects({
      file: bytes,
      parsers: { timestampFromMicroseconds: (us: bigint) => us } as never,
    });
    expect(rows).toHaveLength(total);
    rows.forEach((r, i) => {
      const want = record(i);
      expect(r.id).toBe(want.id);
      expect(Number(r.createdAt)).toBe(want.createdAt);
      expect(r.userId).toBe(want.userId);
      expect(r.groupId).toBe(want.groupId);
      expect(r.metadata).toBe(want.metadata);
      expect(r.messages).toEqual(
        want.messages.map((m) => ({
          role: m.role,
          content: m.content,
          name: "name" in m ? m.name : null,
          tool_call_id: "tool_call_id" in m ? m.tool_call_id : null,
          // Structs a chat template can loop over (before, their JSON text); a null list reads
          // as undefined here (pyarrow's None).
          tool_calls: "tool_calls" in m ? m.tool_calls : undefined,
          weight: null,
        })),
      );
    });
    file.remove();
    expect(readdirSync(scratch)).toEqual([]);

    // DuckDB reads the joined file through its footer's offsets: statistics and bloom filters
    // (which skip row groups in a lookup) and every column chunk, in the last part as in the first.
    const joined = path.join(root, "joined.parquet");
    writeFileSync(joined, Buffer.from(bytes));
    const duck = await DuckDBInstance.create(":memory:");
    const db = await duck.connect();
    try {
      const read = async (q: string) => (await db.runAndReadAll(q)).getRowsJS();
      for (const i of [0, 4_999, 22_222, total - 1]) {
        expect(await read(`select id, metadata from '${joined}' where id = 'smp_${i}'`)).toEqual([
          [`smp_${i}`, record(i).metadata],
        ]);
      }
      expect(await read(`select count(*) from '${joined}' where id = 'smp_${total}'`)).toEqual([[0n]]);
      // A tool call's fields as columns of their own, as a reader of the messages meets them.
      expect(
        await read(
          `select messages[2].tool_calls[1].function.name, messages[2].tool_calls[1].id, messages[1].tool_calls is null
           from '${joined}' where id = 'smp_5'`,
        ),
      ).toEqual([[call.function.name, call.id, true]]);
      for (const g of [0, 2, 4]) {
        const want = Array.from({ length: total }, (_, i) => record(i)).filter((r) => r.groupId === `g${g}`).length;
        expect(await read(`select count(*) from '${joined}' where groupId = 'g${g}'`)).toEqual([[BigInt(want)]]);
      }
      expect(await read(`select count(*), count(distinct id), sum(len(messages)) from '${joined}'`)).toEqual([
        [
          BigInt(total),
          BigInt(total),
          BigInt(Array.from({ length: total }, (_, i) => record(i).messages.length).reduce((a, b) => a + b)),
        ],
      ]);
    } finally {
      db.closeSync();
      duck.closeSync();
    }
  });

  it("converts every part of a file with one DuckDB instance, its buffer pool emptied after each part", async () => {
    const create = vi.spyOn(DuckDBInstance, "create");
    const run = vi.spyOn(DuckDBConnection.prototype, "run");
    try {
      const file = new ParquetFile(scratchDir(), live(), 64 * 1024);
      const total = 3_000;
      const text = Buffer.from(Array.from({ length: total }, (_, i) => line(record(i))).join(""));
      for (let at = 0; at < text.length; at += 20_000) await file.write(text.subarray(at, at + 20_000));
      const metadata = parquetMetadata(await bytesOf(file));
      file.remove();
      const parts = metadata.row_groups.length; // one group per part here
      expect(parts).toBeGreaterThanOrEqual(10);
      expect(Number(metadata.num_rows)).toBe(total);
      expect(create).toHaveBeenCalledTimes(1);
      // After each part, the limit down to 1 MB and back: what makes DuckDB evict its pool.
      const limits = run.mock.calls.map(([sql]) => sql).filter((sql) => sql.includes("memory_limit"));
      expect(limits).toEqual(
        Array.from({ length: parts }, () => ["set memory_limit = '1MB'", "set memory_limit = '96MB'"]).flat(),
      );
    } finally {
      create.mockRestore();
      run.mockRestore();
    }
  });

  it("converts samples of several MB, up to the 16 MB a batch add can store", { timeout: 60_000 }, async () => {
    const scratch = scratchDir();
    const file = new ParquetFile(scratch, live());
    const big = (i: number, mb: number) => ({
      ...record(i),
      messages: [
        { role: "user", content: `${i}`.padEnd(mb * 1024 * 1024, "x") },
        { role: "assistant", content: "ok" },
      ],
    });
    // Two parts of the default size (each ends with a whole record), then one record of 15 MB.
    const sizes = [3, 3, 3, 3, 3, 3, 3, 3, 15];
    for (const [i, mb] of sizes.entries()) await file.write(Buffer.from(line(big(i, mb))));
    const rows = await parquetReadObjects({ file: await bytesOf(file), columns: ["id", "messages"] });
    expect(rows.map((r) => r.id)).toEqual(sizes.map((_, i) => `smp_${i}`));
    expect(rows.map((r) => (r.messages as { content: string }[])[0]!.content.length)).toEqual(
      sizes.map((mb) => mb * 1024 * 1024),
    );
    file.remove();
  });

  it("writes an empty selection as a valid file with no rows, and creates nothing before it is used", async () => {
    const scratch = scratchDir();
    const file = new ParquetFile(scratch, live());
    expect(readdirSync(scratch)).toEqual([]);
    const bytes = await bytesOf(file);
    expect(Number(parquetMetadata(bytes).num_rows)).toBe(0);
    expect(await parquetReadObjects({ file: bytes })).toEqual([]);
    file.remove();
    expect(readdirSync(scratch)).toEqual([]);
  });

  it("fails on its first write, not when made, where the scratch folder cannot be created", async () => {
    const blocked = path.join(scratchDir(), "a-file");
    writeFileSync(blocked, "");
    const file = new ParquetFile(blocked, live()); // a file where its folder's parent should be
    await expect(file.write(Buffer.from("{}\n"))).rejects.toThrow(/ENOTDIR|EEXIST/);
    file.remove();
  });

  it("stops converting when aborted, and leaves nothing behind once removed", async () => {
    const scratch = scratchDir();
    const abort = new AbortController();
    const file = new ParquetFile(scratch, abort.signal);
    await file.write(Buffer.from(line(record(1))));
    abort.abort(new Error("shutting down"));
    await expect(file.finish()).rejects.toThrow("shutting down");
    file.remove();
    expect(readdirSync(scratch)).toEqual([]);
  });

  it("sweeps the scratch folders of dead writers only", async () => {
    const scratch = scratchDir();
    const writing = new ParquetFile(scratch, live());
    await writing.write(Buffer.from(line(record(1))));
    const dead = path.join(scratch, "parquet-dead");
    mkdirSync(path.join(dead, "spill"), { recursive: true });
    writeFileSync(path.join(dead, "rows.jsonl"), "{}\n");
    writeFileSync(path.join(dead, "spill", "x.block"), "");
    const old = new Date(Date.now() - 120_000);
    for (const p of [
      path.join(dead, "spill", "x.block"),
      path.join(dead, "spill"),
      path.join(dead, "rows.jsonl"),
      dead,
    ])
      utimesSync(p, old, old);
    writeFileSync(path.join(scratch, "other-file"), "not ours");
    await sweepParquetScratch(scratch, 60_000);
    const left = readdirSync(scratch);
    expect(left).toHaveLength(2);
    expect(left).toContain("other-file");
    expect(left.filter((n) => n.startsWith("parquet-") && n !== "parquet-dead")).toHaveLength(1);
    // The live writer's file is still there and converts.
    const rows = await parquetReadObjects({ file: await bytesOf(writing) });
    expect(rows.map((r) => r.id)).toEqual(["smp_1"]);
    writing.remove();
  });

  it("fails on a line that is not a record, with DuckDB's reason", async () => {
    const scratch = scratchDir();
    const file = new ParquetFile(scratch, live());
    await file.write(Buffer.from(line(record(1)) + "{not json\n"));
    await expect(file.finish()).rejects.toThrow(/json/i);
    file.remove();
    expect(readdirSync(scratch)).toEqual([]);
  });
});
