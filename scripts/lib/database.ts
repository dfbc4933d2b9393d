import { mkdirSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { connect, type DbHandle } from "@/lib/db/client";
import { startEmbeddedDb, type EmbeddedDb } from "@/lib/db/embedded";
import { migrateDatabase } from "@/lib/db/migrate";
import { readEmbeddedInfo } from "@/lib/db/url";
import { env } from "@/lib/env";
import { lockAbandoned, readLock, takeOverLock, tryLock } from "@/lib/pid-lock";
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
  const held = await holdServer(dataDir, options.log ?? ((line) => console.error(line)));
  if ("url" in held) throw new Error(`An embedded database already serves ${dataDir} (${held.url}).`);
  try {
    const db = await startOwnServer(dataDir, options);
    return {
      ...db,
      stop: async () => {
        try {
          await db.stop();
        } finally {
          held.release();
        }
      },
    };
  } catch (err) {
    held.release();
    throw err;
  }
}

/**
 * One process at a time runs the embedded server on DATA_DIR's files (a launcher, or a CLI
 * command while no launcher runs): it holds DATA_DIR/embedded-db.lock (its pid) for as long as
 * its server runs. Before, a second one (two CLI commands at once, `npm start` during one) shut
 * the first one's server down under it. The next waits, up to `waitMs`, for the holder to finish,
 * or to announce its server (`useAnnounced`: a launcher's, which a CLI command then uses); a lock
 * whose process is gone, or whose pid another process has been given since, is taken over (its
 * server is then shut down by startEmbeddedDb): lib/pid-lock.ts.
 */
async function holdServer(
  dataDir: string,
  log: (line: string) => void,
  options: { useAnnounced?: boolean; waitMs?: number } = {},
): Promise<{ release: () => void } | { url: string }> {
  const file = path.join(dataDir, "embedded-db.lock");
  const deadline = Date.now() + (options.waitMs ?? 120_000);
  let told = false;
  let unreadable = 0;
  mkdirSync(dataDir, { recursive: true });
  for (;;) {
    const release = tryLock(file);
    if (release) return { release };
    const lock = readLock(file);
    if (!lock) continue; // released meanwhile
    // Being written: look again; garbage for a while is taken over.
    if (!lock.holder && ++unreadable < 10) {
      await sleep(100);
      continue;
    }
    if (!lock.holder || lockAbandoned(lock)) {
      takeOverLock(file, lock);
      continue;
    }
    const pid = lock.holder.pid;
    const announced = options.useAnnounced ? readEmbeddedInfo(dataDir) : undefined;
    if (announced) return { url: announced.url };
    if (Date.now() > deadline)
      throw new Error(`Another process (pid ${pid}) is using the embedded database in ${dataDir}; try again later.`);
    if (!told) log(`Waiting for pid ${pid}, which is using the embedded database in ${dataDir}…`);
    told = true;
    await sleep(200);
  }
}

async function startOwnServer(
  dataDir: string,
  options: { port?: number; password?: string; announce?: boolean; log?: (line: string) => void },
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
    const log = (line: string) => console.error(line);
    // Another command's server, or a launcher starting: wait for it (a launcher's is then used).
    const held = await holdServer(e.DATA_DIR, log, { useAnnounced: true });
    if ("url" in held) url = held.url;
    else {
      try {
        const own = await startOwnServer(e.DATA_DIR, { log });
        embedded = { ...own, stop: () => own.stop().finally(held.release) };
      } catch (err) {
        held.release();
        throw err;
      }
      url = embedded.url;
    }
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
