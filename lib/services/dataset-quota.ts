import { sql } from "drizzle-orm";
import type { DbOrTx } from "../db/client";
import { rateLimited } from "../errors";

/**
 * Datasets a team may have packaging at once (its `datasetJobs` limit): one team queueing
 * hundreds of large files would otherwise hold every worker's packager. 429 with Retry-After;
 * the check counts PROCESSING datasets, so concurrent requests may overshoot by a few.
 */
export async function assertDatasetQuota(db: DbOrTx, teamId: string, limit: number): Promise<void> {
  const [row] = await db.execute<{ n: number }>(
    sql`select count(*)::int as n from datasets where team_id = ${teamId} and status = 'PROCESSING' and deleted_at is null`,
  );
  const n = row?.n ?? 0;
  if (n >= limit) {
    throw rateLimited(`This team already has ${n} datasets being packaged (limit ${limit}); retry when one is READY.`, {
      "retry-after": "10",
    });
  }
}
