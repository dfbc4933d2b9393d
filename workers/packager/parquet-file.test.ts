import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects } from "hyparquet";
import { afterAll, describe, expect, it } from "vitest";
import { ParquetFile, sweepParquetScratch } from "./parquet-file";

const root = mkdtempSync(path.join(os.tmpdir(), "lmp-parquet-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
/** A scratch directory of each test's own. */
const scratchDir = () => mkdtempSync(path.join(root, "t-"));

const call = { id: "c1", type: "function", function: { name: "f", arguments: '{"x":1}' } };

/** The record the packager's COPY renders for a sample (lib/services/dataset-jobs.ts). */
const record = (i: number) => ({
  id: `smp_${i}`,
  createdAt: 1_700_000_000_000_000 + i,
  userId: i % 3 ? `u${i % 7}` : null,
  groupId: null,
  metadata: i % 2 ? JSON.stringify({ n: String(i), nested: { t: "a\tb" } }) : null,
  messages: [
    { role: "user", content: `question ${i} é\n\t"quoted"`, extra: "ignored" },
    i % 5 ? { role: "assistant", content: `answer ${i}` } : { role: "assistant", content: null, tool_calls: [call] },
    ...(i % 5 ? [] : [{ role: "tool", content: "r", tool_call_id: "c1", name: "f" }]),
  ],
});

describe("ParquetFile", () => {
  it("converts the records, in order and in several row groups, as an independent reader reads them", async () => {
    const scratch = scratchDir();
    const file = new ParquetFile(scratch);
    const total = 45_000;
    // Lines arrive in chunks cut anywhere, as COPY chunks are.
    const text = Buffer.from(Array.from({ length: total }, (_, i) => JSON.stringify(record(i)) + "\n").join(""));
    for (let at = 0; at < text.length; at += 70_001) await file.write(text.subarray(at, at + 70_001));
    const at = await file.finish(new AbortController().signal);
    const bytes = await asyncBufferFromFile(at);
    // Groups of about 10,000 rows (DuckDB rounds to its vectors of 2,048): memory holds about one at a time.
    const groups = (await parquetMetadataAsync(bytes)).row_groups.map((g) => Number(g.num_rows));
    expect(groups.length).toBeGreaterThanOrEqual(4);
    for (const n of groups) expect(n).toBeLessThanOrEqual(10_240);
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
      expect(r.groupId).toBeNull();
      expect(r.metadata).toBe(want.metadata);
      expect(r.messages).toEqual(
        want.messages.map((m) => ({
          role: m.role,
          content: m.content,
          name: "name" in m ? m.name : null,
          tool_call_id: "tool_call_id" in m ? m.tool_call_id : null,
          tool_calls: "tool_calls" in m ? JSON.stringify(m.tool_calls) : null,
        })),
      );
    });
    file.remove();
    expect(readdirSync(scratch)).toEqual([]);
  });

  it("writes an empty selection as a valid file with no rows, and creates nothing before it is used", async () => {
    const scratch = scratchDir();
    const file = new ParquetFile(scratch);
    expect(readdirSync(scratch)).toEqual([]);
    const bytes = await asyncBufferFromFile(await file.finish(new AbortController().signal));
    expect(Number((await parquetMetadataAsync(bytes)).num_rows)).toBe(0);
    expect(await parquetReadObjects({ file: bytes })).toEqual([]);
    file.remove();
    expect(readdirSync(scratch)).toEqual([]);
  });

  it("fails on its first write, not when made, where the scratch folder cannot be created", async () => {
    const blocked = path.join(scratchDir(), "a-file");
    writeFileSync(blocked, "");
    const file = new ParquetFile(blocked); // a file where its folder's parent should be
    await expect(file.write(Buffer.from("{}\n"))).rejects.toThrow(/ENOTDIR|EEXIST/);
    file.remove();
  });

  it("stops converting when aborted, and leaves nothing behind once removed", async () => {
    const scratch = scratchDir();
    const file = new ParquetFile(scratch);
    await file.write(Buffer.from(JSON.stringify(record(1)) + "\n"));
    const abort = new AbortController();
    abort.abort(new Error("shutting down"));
    await expect(file.finish(abort.signal)).rejects.toThrow("shutting down");
    file.remove();
    expect(readdirSync(scratch)).toEqual([]);
  });

  it("sweeps the scratch folders of dead writers only", async () => {
    const scratch = scratchDir();
    const live = new ParquetFile(scratch);
    await live.write(Buffer.from(JSON.stringify(record(1)) + "\n"));
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
    const at = await live.finish(new AbortController().signal);
    const rows = await parquetReadObjects({
      file: await asyncBufferFromFile(at),
    });
    expect(rows.map((r) => r.id)).toEqual(["smp_1"]);
    live.remove();
  });

  it("fails on a line that is not a record, with DuckDB's reason", async () => {
    const scratch = scratchDir();
    const file = new ParquetFile(scratch);
    await file.write(Buffer.from(JSON.stringify(record(1)) + "\n{not json\n"));
    await expect(file.finish(new AbortController().signal)).rejects.toThrow(/json/i);
    file.remove();
    expect(readdirSync(scratch)).toEqual([]);
  });
});
