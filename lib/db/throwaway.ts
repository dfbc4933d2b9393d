import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { startEmbeddedDb, type EmbeddedDb } from "./embedded";
import { migrateDatabase } from "./migrate";

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
