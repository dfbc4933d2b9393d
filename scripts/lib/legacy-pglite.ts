import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { migrateDatabase, migrationsFolder } from "@/lib/db/migrate";

/**
 * Versions before the embedded PostgreSQL kept their database in DATA_DIR/pgdata as PGlite files.
 * On the first start of this version, their data moves into the new cluster:
 * 1. the new database is migrated to the schema the old files have (as many migrations as PGlite
 *    applied: later ones may need what PGlite lacks, such as the pg_trgm extension);
 * 2. every table is copied, in one transaction (all or nothing);
 * 3. the remaining migrations run on the copied data (their backfills included);
 * 4. the old folder is renamed, not deleted.
 * PGlite (a dependency for this alone) is loaded only here.
 */
export const legacyDir = (dataDir: string) => path.join(dataDir, "pgdata");

const BATCH = 2000;

type Journal = { entries: { tag: string; when: number }[] };

/** A migrations folder holding only the first `count` migrations of ours. */
export function migrationsUpTo(count: number): { folder: string; remove: () => void } {
  const journal = JSON.parse(readFileSync(path.join(migrationsFolder, "meta/_journal.json"), "utf8")) as Journal;
  const folder = mkdtempSync(path.join(os.tmpdir(), "lmp-migrations-"));
  mkdirSync(path.join(folder, "meta"));
  const entries = journal.entries.slice(0, count);
  for (const e of entries) cpSync(path.join(migrationsFolder, `${e.tag}.sql`), path.join(folder, `${e.tag}.sql`));
  writeFileSync(path.join(folder, "meta/_journal.json"), JSON.stringify({ ...journal, entries }));
  return { folder, remove: () => rmSync(folder, { recursive: true, force: true }) };
}

export async function migrateLegacyData(
  dataDir: string,
  targetUrl: string,
  log: (line: string) => void,
): Promise<void> {
  const source = legacyDir(dataDir);
  if (!existsSync(path.join(source, "PG_VERSION"))) return;
  const target = postgres(targetUrl, { max: 1, onnotice: () => {} });
  try {
    const hasData = await target<{ n: number }[]>`
      select count(*)::int as n from information_schema.tables where table_schema = 'public' and table_name = 'teams'`;
    if (hasData[0]!.n > 0 && (await target`select 1 from teams limit 1`).length > 0) {
      log(
        `[db] ${source} holds a database of an earlier version (PGlite), but the embedded PostgreSQL ` +
          "already has data, so it was left alone. Delete or rename that folder to silence this message.",
      );
      return;
    }
    log(`[db] Moving the data of an earlier version (PGlite, ${source}) into the embedded PostgreSQL…`);
    const started = Date.now();
    const { PGlite } = await import("@electric-sql/pglite");
    const pg = await PGlite.create(source);
    try {
      const applied = (
        await pg.query<{ n: number }>("select count(*)::int as n from drizzle.__drizzle_migrations").catch(() => ({
          rows: [{ n: 0 }],
        }))
      ).rows[0]!.n;
      const upTo = migrationsUpTo(applied);
      try {
        await migrateDatabase(targetUrl, upTo.folder);
      } finally {
        upTo.remove();
      }
      const tables = (
        await pg.query<{ name: string }>(
          `select table_name as name from information_schema.tables
           where table_schema = 'public' and table_type = 'BASE TABLE' and table_name <> 'workers'
           order by table_name`,
        )
      ).rows.map((t) => t.name);
      const counts: string[] = [];
      await target.begin(async (tx) => {
        // Foreign keys were checked by the source already; rows arrive table by table.
        await tx`set local session_replication_role = replica`;
        for (const table of tables) {
          const id = `"${table.replaceAll('"', '""')}"`;
          let copied = 0;
          await pg.transaction(async (src) => {
            await src.query(`declare legacy_rows no scroll cursor for select to_jsonb(t)::text as row from ${id} t`);
            for (;;) {
              const { rows } = await src.query<{ row: string }>(`fetch ${BATCH} from legacy_rows`);
              if (rows.length === 0) break;
              const json = `[${rows.map((r) => r.row).join(",")}]`;
              await tx.unsafe(
                `insert into ${id} select * from jsonb_populate_recordset(null::${id}, $1::text::jsonb)`,
                [json],
              );
              copied += rows.length;
            }
            await src.query("close legacy_rows");
          });
          if (copied > 0) counts.push(`${copied} ${table}`);
        }
      });
      log(`[db] Moved ${counts.join(", ") || "no rows"} in ${((Date.now() - started) / 1000).toFixed(1)} s.`);
    } finally {
      await pg.close();
    }
    await migrateDatabase(targetUrl); // the migrations PGlite never had, on the copied rows
    const backup = `${source}.pglite-backup`;
    renameSync(source, existsSync(backup) ? `${backup}-${Date.now()}` : backup);
    log(`[db] The old files are kept in ${backup}; delete that folder once you no longer need it.`);
  } finally {
    await target.end({ timeout: 5 });
  }
}
