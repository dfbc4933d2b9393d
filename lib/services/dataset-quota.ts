import { sql } from "drizzle-orm";
import type { DbOrTx } from "../db/client";
import type { Dataset, Team } from "../db/schema";
import { rateLimited } from "../errors";
import { teamLimits } from "../limits";
import { withQuerySlot } from "../limits/team-queries";
import { createDataset } from "./datasets";

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

/**
 * A team's create-dataset (the API's and the dashboard's): its selection is counted as one of the
 * team's selection queries (DB_QUERIES_PER_TEAM: an expensive `search` counted by ten requests
 * at once held every connection of the pool, as `count` did before it took a slot), within the
 * team's `datasetJobs`.
 */
export async function createTeamDataset(
  db: DbOrTx,
  team: Pick<Team, "id" | "limits">,
  input: Omit<Parameters<typeof createDataset>[1], "teamId">,
): Promise<Dataset> {
  return withQuerySlot(team.id, async () => {
    await assertDatasetQuota(db, team.id, teamLimits(team).datasetJobs);
    return createDataset(db, { ...input, teamId: team.id });
  });
}
