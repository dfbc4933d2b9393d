import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { afterAll, describe, expect, it } from "vitest";
import { ParquetFile, type ParquetRow } from "./parquet-file";

const tmp = mkdtempSync(path.join(os.tmpdir(), "lmp-parquet-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const row = (i: number): ParquetRow => ({
  id: `smp_${i}`,
  createdAtMicros: 1_700_000_000_000_000n + BigInt(i),
  userId: i % 3 ? `u${i % 7}` : null,
  groupId: null,
  metadata: i % 2 ? JSON.stringify({ n: String(i) }) : null,
  messages: [
    { role: "user", content: `question ${i}`, name: null, tool_call_id: null, tool_calls: null },
    { role: "assistant", content: i % 5 ? `answer ${i}` : null, name: null, tool_call_id: null, tool_calls: null },
  ],
});

describe("ParquetFile", () => {
  it("writes many row groups of bounded size whose rows read back in order", async () => {
    const chunks: Buffer[] = [];
    const file = new ParquetFile(async (c) => void chunks.push(c));
    const total = 4_500;
    for (let i = 0; i < total; i++) await file.add(row(i));
    await file.finish();
    // Each group reached the sink on its own, before the end: memory holds one group at a time.
    expect(chunks.length).toBeGreaterThanOrEqual(3);
    const at = path.join(tmp, "rows.parquet");
    writeFileSync(at, Buffer.concat(chunks));
    const duck = await (await DuckDBInstance.create(":memory:")).connect();
    const groups = await duck.runAndReadAll(`select count(distinct row_group_id) as n from parquet_metadata('${at}')`);
    expect(Number(groups.getRowObjectsJS()[0]!.n)).toBe(3);
    const read = await duck.runAndReadAll(
      `select id, epoch_us(createdAt)::varchar as us, userId, metadata, to_json(messages)::varchar as messages from '${at}'`,
    );
    const rows = read.getRowObjectsJS();
    expect(rows).toHaveLength(total);
    rows.forEach((r, i) => {
      const want = row(i);
      expect(r.id).toBe(want.id);
      expect(BigInt(r.us as string)).toBe(want.createdAtMicros);
      expect(r.userId).toBe(want.userId);
      expect(r.metadata).toBe(want.metadata);
      expect(JSON.parse(r.messages as string)).toEqual(want.messages);
    });
  });
});
