import { sql, type SQL } from "drizzle-orm";

/**
 * How long a background job (a dataset's packaging, an import) waits after its `attempts`-th
 * claim failed before it may be claimed again: 10 s, 40 s, 160 s…, at most 10 minutes. With the
 * default three attempts, a failure that lasts under a minute no longer fails the job.
 */
export const retryDelay = (attempts: SQL): SQL =>
  sql`make_interval(secs => least(600, 10 * power(4, greatest(${attempts}, 1) - 1)))`;
