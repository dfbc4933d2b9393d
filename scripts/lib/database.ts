import path from "node:path";
import { connect, type DbHandle } from "@/lib/db/client";
import { startEmbeddedDb, type EmbeddedDb } from "@/lib/db/embedded";
import { migrateDatabase } from "@/lib/db/migrate";
import { readEmbeddedInfo } from "@/lib/db/url";
import { env } from "@/lib/env";
import { migrateLegacyData } from "./legacy-pglite";

/** Where the embedded database keeps its files under DATA_DIR. */
export const embeddedPaths = (dataDir: string) => ({
  /** The PostgreSQL cluster (initdb'd on first start). */
  cluster: path.join(dataDir, "pg"),
  /** Its generated password (mode 0600). */
  passwordFile: path.join(dataDir, "db-password"),
  /** The server's log. */
  logFile: path.join(dataDir, "pg.log"),
});

/**
 * Starts the embedded database on DATA_DIR's files (initialising them on first use, moving a
 * PGlite folder of an earlier version over first). `infoDir` makes it findable by the CLI and
 * other processes while it runs.
 */
export async function startAppEmbeddedDb(
  dataDir: string,
  options: { port?: number; password?: string; announce?: boolean; log?: (line: string) => void } = {},
): Promise<EmbeddedDb> {
  const p = embeddedPaths(dataDir);
  const db = await startEmbeddedDb({
    dir: p.cluster,
    port: options.port,
    password: options.password,
    passwordFile: p.passwordFile,
    logFile: p.logFile,
    infoDir: options.announce ? dataDir : undefined,
  });
  try {
    await migrateLegacyData(dataDir, db.url, options.log ?? ((line) => console.log(line)));
  } catch (err) {
    await db.stop();
    throw err;
  }
  return db;
}

/**
 * Opens the database the app uses, whether or not the app is running: DATABASE_URL when set;
 * else the embedded database `npm start` serves; else this process starts the embedded server on
 * DATA_DIR's files for as long as `fn` runs. Migrations are applied first either way.
 */
export async function withAppDatabase<T>(fn: (handle: DbHandle) => Promise<T>): Promise<T> {
  const e = env();
  let embedded: EmbeddedDb | undefined;
  let url = e.DATABASE_URL ?? readEmbeddedInfo(e.DATA_DIR)?.url;
  if (!url) {
    embedded = await startAppEmbeddedDb(e.DATA_DIR, { log: (line) => console.error(line) });
    url = embedded.url;
  }
  try {
    await migrateDatabase(url);
    const handle = connect(url, { max: 2 });
    try {
      return await fn(handle);
    } finally {
      await handle.close();
    }
  } finally {
    await embedded?.stop();
  }
}
