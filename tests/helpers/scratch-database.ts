import { inject } from "vitest";
import { createScratchDatabase } from "@/lib/db/throwaway";

/**
 * A migrated database on the project's server (the embedded PostgreSQL or TEST_DATABASE_URL)
 * that no suite process uses: for tests that start their own workers and must not share jobs
 * with the suite's worker.
 */
export function scratchDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  return createScratchDatabase(inject("adminDatabaseUrl"), "scratch");
}
