import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrateDatabase, migrationsFolder } from "./migrate";
import { createScratchDatabase, startThrowawayDb } from "./throwaway";

let server: Awaited<ReturnType<typeof startThrowawayDb>>;
let database: Awaited<ReturnType<typeof createScratchDatabase>>;
const dirs: string[] = [];
beforeAll(async () => {
  server = await startThrowawayDb();
  database = await createScratchDatabase(server.url, "migrate_locks");
}, 60_000);
afterAll(async () => {
  await database?.drop();
  await server?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** The project's migrations and `extra` after them (an upgrade's new ones). */
function folderWith(extra: { tag: string; sql: string }[]): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lmp-migrations-"));
  dirs.push(dir);
  cpSync(migrationsFolder, dir, { recursive: true });
  const journalFile = path.join(dir, "meta/_journal.json");
  const journal = JSON.parse(readFileSync(journalFile, "utf8")) as { entries: Record<string, unknown>[] };
  const last = journal.entries.at(-1)!;
  extra.forEach((m, i) => {
    writeFileSync(path.join(dir, `${m.tag}.sql`), m.sql);
    journal.entries.push({
      ...last,
      idx: journal.entries.length,
      tag: m.tag,
      when: Number(last.when) + 1000 * (i + 1),
    });
  });
  writeFileSync(journalFile, JSON.stringify(journal));
  return dir;
}

describe("migrations on a live database", () => {
  it("wait for a table's lock a few seconds at a time, so the table's other queries go on meanwhile", async () => {
    const first = folderWith([{ tag: "9000_table", sql: "CREATE TABLE mig_t (v int); INSERT INTO mig_t VALUES (1);" }]);
    await migrateDatabase(database.url, first);
    const both = folderWith([
      { tag: "9000_table", sql: "CREATE TABLE mig_t (v int); INSERT INTO mig_t VALUES (1);" },
      { tag: "9001_column", sql: "ALTER TABLE mig_t ADD COLUMN w int;" },
    ]);
    // A long query on the table (a packaging's COPY) holds its lock.
    const holder = postgres(database.url, { max: 1, onnotice: () => {} });
    const reader = postgres(database.url, { max: 1, onnotice: () => {} });
    let release!: () => void;
    const held = holder.begin(async (tx) => {
      await tx`select * from mig_t`;
      await new Promise<void>((r) => (release = r));
    });
    await new Promise((r) => setTimeout(r, 200));
    const lines: string[] = [];
    const migrating = migrateDatabase(database.url, both, (l) => lines.push(l));
    await new Promise((r) => setTimeout(r, 1000)); // the ALTER is waiting for the lock by now
    // Before: the ALTER waited without a limit, and every query on the table queued behind it.
    await expect(
      reader.begin(async (tx) => {
        await tx`set local statement_timeout = '6s'`;
        return tx`select count(*)::int as n from mig_t`;
      }),
    ).resolves.toEqual([{ n: 1 }]);
    release();
    await held;
    await migrating;
    expect(lines[0]).toBe("Applying 1 database migration (9001_column)…");
    expect(lines.some((l) => l.includes("waits for a table another query holds"))).toBe(true);
    expect(
      await reader`select column_name from information_schema.columns where table_name = 'mig_t' order by 1`,
    ).toEqual([{ column_name: "v" }, { column_name: "w" }]);
    // Nothing pending: nothing said.
    const again: string[] = [];
    await migrateDatabase(database.url, both, (l) => again.push(l));
    expect(again).toEqual([]);
    await holder.end();
    await reader.end();
  }, 60_000);
});
