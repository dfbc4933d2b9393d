import { sql } from "drizzle-orm";
import type { DbOrTx } from "../db/client";
import { deployments } from "../db/schema";

/** Every model some deployment points at: what the workers must be able to serve. */
export async function listDeployedModels(db: DbOrTx): Promise<string[]> {
  const rows = await db
    .selectDistinct({ model: deployments.model })
    .from(deployments)
    .orderBy(sql`1`);
  return rows.map((r) => r.model);
}
