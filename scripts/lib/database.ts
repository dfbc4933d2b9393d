import path from "node:path";
import { connect, type DbHandle } from "@/lib/db/client";
import { startEmbeddedDb, type EmbeddedDb } from "@/lib/db/embedded";
import { migrateDatabase } from "@/lib/db/migrate";
import { readEmbeddedInfo } from "@/lib/db/url";
import { env } from "@/lib/env";

export function embeddedDataDir(dataDir: string): string {
  return path.join(dataDir, "pgdata");
}

/**
 * Opens the database the app uses, whether or not the app is running: DATABASE_URL when set;
 * else the embedded database `npm start` serves; else this process opens the embedded files
 * itself for as long as `fn` runs. Migrations are applied first either way.
 */
export async function withAppDatabase<T>(fn: (handle: DbHandle) => Promise<T>): Promise<T> {
  const e = env();
  let embedded: EmbeddedDb | undefined;
  let url = e.DATABASE_URL ?? readEmbeddedInfo(e.DATA_DIR)?.url;
  if (!url) {
    embedded = await startEmbeddedDb({ dir: embeddedDataDir(e.DATA_DIR) });
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
