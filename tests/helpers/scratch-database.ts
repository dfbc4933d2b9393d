import postgres from "postgres";
import { startEmbeddedDb } from "@/lib/db/embedded";
import { migrateDatabase } from "@/lib/db/migrate";

/**
 * A migrated database of the project's kind (TEST_DB) that no suite process uses: for tests
 * that start their own workers and must not share jobs with the suite's worker.
 */
export async function scratchDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  if (process.env.TEST_DB !== "postgres") {
    const db = await startEmbeddedDb({});
    await migrateDatabase(db.url);
    return { url: db.url, drop: db.stop };
  }
  const admin = postgres(process.env.TEST_DATABASE_URL!, { max: 1, onnotice: () => {} });
  const name = `lmp_scratch_${process.pid}_${Date.now()}`;
  await admin.unsafe(`create database ${name}`);
  const url = new URL(process.env.TEST_DATABASE_URL!);
  url.pathname = `/${name}`;
  await migrateDatabase(url.toString());
  return {
    url: url.toString(),
    // DROP DATABASE waits for a checkpoint, which can take long on a machine busy writing
    // elsewhere: cleanup gives up after a minute (leaving a scratch database) rather than
    // failing the suite's afterAll hook.
    drop: async () => {
      const dropped = admin.unsafe(`drop database if exists ${name} with (force)`).then(() => true);
      const gaveUp = new Promise<false>((resolve) => setTimeout(() => resolve(false), 60_000).unref());
      if (!(await Promise.race([dropped, gaveUp]))) console.warn(`scratch database ${name} not dropped within 60 s`);
      await admin.end({ timeout: 1 });
    },
  };
}
