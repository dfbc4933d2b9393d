import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { parquetReadObjects } from "hyparquet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { joinedParquetFooter, PARQUET_MAGIC, readParquetPart } from "./parquet-concat";

const dir = mkdtempSync(path.join(os.tmpdir(), "lmp-concat-"));
const at = (name: string) => path.join(dir, name);

beforeAll(async () => {
  const duck = await DuckDBInstance.create(":memory:");
  const db = await duck.connect();
  // Two files of one schema (several row groups each, a list column, statistics), one of another.
  for (const [name, from] of [
    ["a", 0],
    ["b", 5_000],
  ] as const) {
    await db.run(
      `copy (select 'r' || i as id, i as n, [i, i + 1] as pair from range(${from}, ${from} + 5000) t(i))
       to '${at(`${name}.parquet`)}' (format parquet, row_group_size 2048)`,
    );
  }
  await db.run(`copy (select 1 as other) to '${at("other.parquet")}' (format parquet)`);
  db.closeSync();
  duck.closeSync();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The joined file: the magic, each part's body, the footer. */
async function join(names: string[]): Promise<Buffer> {
  const parts = await Promise.all(names.map((n) => readParquetPart(at(n))));
  const bodies = parts.map((p) => readFileSync(p.file).subarray(4, p.bodyEnd));
  return Buffer.concat([PARQUET_MAGIC, ...bodies, joinedParquetFooter(parts)]);
}

describe("joining Parquet files", () => {
  it("writes back a footer it did not change byte for byte (every field, with its Thrift type)", async () => {
    const original = readFileSync(at("a.parquet"));
    expect((await join(["a.parquet"])).equals(original)).toBe(true);
  });

  it("joins files row group by row group, which DuckDB and an independent reader read whole", async () => {
    const joined = await join(["a.parquet", "b.parquet", "a.parquet"]);
    writeFileSync(at("joined.parquet"), joined);
    const rows = await parquetReadObjects({
      file: joined.buffer.slice(joined.byteOffset, joined.byteOffset + joined.length) as ArrayBuffer,
    });
    const want = [...Array(10_000).keys(), ...Array(5_000).keys()];
    expect(rows.map((r) => Number(r.n))).toEqual(want);
    expect(rows[7_000]).toEqual({ id: "r7000", n: 7000n, pair: [7000n, 7001n] });

    const duck = await DuckDBInstance.create(":memory:");
    const db = await duck.connect();
    const read = async (q: string) => (await db.runAndReadAll(q)).getRowsJS();
    try {
      expect(await read(`select count(*), sum(n), max(pair[2]) from '${at("joined.parquet")}'`)).toEqual([
        [15_000n, BigInt(want.reduce((a, b) => a + b)), 10_000n],
      ]);
      // A lookup skips row groups by the statistics of each, which now lie at their new offsets.
      expect(await read(`select id from '${at("joined.parquet")}' where n = 9999`)).toEqual([["r9999"]]);
      // Row groups are numbered in order across the joined files.
      const groups = await read(
        `select distinct row_group_id, row_group_num_rows from parquet_metadata('${at("joined.parquet")}') order by 1`,
      );
      expect(groups.map((g) => g[0])).toEqual([...Array(groups.length).keys()].map(BigInt));
      expect(groups.reduce((sum, g) => sum + (g[1] as bigint), 0n)).toBe(15_000n);
    } finally {
      db.closeSync();
      duck.closeSync();
    }
  });

  it("refuses files of different schemas, and files that are not Parquet", async () => {
    await expect(join(["a.parquet", "other.parquet"])).rejects.toThrow("different schemas");
    writeFileSync(at("text.parquet"), "not parquet at all");
    await expect(readParquetPart(at("text.parquet"))).rejects.toThrow("not a Parquet file");
  });
});
