import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { startEmbeddedDb, type EmbeddedDb } from "./embedded";
import { migrateDatabase } from "./migrate";
import { connect, type DbHandle } from "./client";
import { changeFeedOf } from "./change-feed";

// Databases that live as long as a test run or a benchmark.

/**
 * A throwaway embedded PostgreSQL for tests and benchmarks, in a temporary folder that the
 * server's user can reach (as root, the server runs as another user). Not durable (no fsync)
 * unless asked: benchmarks measure the settings `npm start` runs with.
 */
export async function startThrowawayDb(options: { durable?: boolean } = {}): Promise<EmbeddedDb> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lmp-pg-"));
  chmodSync(dir, 0o755);
  const db = await startEmbeddedDb({ dir: path.join(dir, "pg"), ephemeral: !options.durable, detached: false });
  return {
    ...db,
    stop: async () => {
      await db.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A new, migrated database on the server at `adminUrl`; `drop()` removes it. DROP DATABASE waits
 * for a checkpoint, which can take long on a machine busy writing elsewhere: it gives up after a
 * minute (leaving the database behind) rather than failing the caller's cleanup.
 */
export async function createScratchDatabase(
  adminUrl: string,
  label: string,
): Promise<{ url: string; drop: () => Promise<void> }> {
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  const name = `lmp_${label}_${process.pid}_${Date.now()}_${Math.floor(Math.random() * 1e6)}`;
  await admin.unsafe(`create database ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  await migrateDatabase(url.toString());
  return {
    url: url.toString(),
    drop: async () => {
      const dropped = admin.unsafe(`drop database if exists ${name} with (force)`).then(() => true);
      const gaveUp = new Promise<false>((resolve) => setTimeout(() => resolve(false), 60_000).unref());
      if (!(await Promise.race([dropped, gaveUp]))) console.warn(`database ${name} not dropped within 60 s`);
      await admin.end({ timeout: 1 });
    },
  };
}

/**
 * For tests of what the change feed drives: a throwaway server with a scratch database, an app
 * process's pool on it with its change feed listening (`app`), and another process's connection
 * (`other`: the CLI, psql). `close()` ends them all.
 */
export async function startFeedWorld(label: string): Promise<{
  url: string;
  app: DbHandle;
  other: postgres.Sql;
  close: () => Promise<void>;
}> {
  const server = await startThrowawayDb();
  const database = await createScratchDatabase(server.url, label);
  const app = connect(database.url, { changeFeed: true });
  const other = postgres(database.url, { max: 1, onnotice: () => {} });
  for (let i = 0; !changeFeedOf(app.sql)?.listening; i++) {
    if (i > 500) throw new Error("the change feed did not start listening");
    await new Promise((r) => setTimeout(r, 10));
  }
  return {
    url: database.url,
    app,
    other,
    close: async () => {
      await app.close();
      await other.end();
      await database.drop();
      await server.stop();
    },
  };
}
