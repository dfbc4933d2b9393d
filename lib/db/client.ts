import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import { attachChangeFeed, ChangeFeed } from "./change-feed";
import { env } from "../env";
import { resolveDatabaseUrl } from "./url";
import * as schema from "./schema";

export type Db = PostgresJsDatabase<typeof schema>;
/** A transaction or the database itself: services accept either so they can join a caller's transaction. */
export type DbOrTx = Db | Parameters<Parameters<Db["transaction"]>[0]>[0];

export type DbHandle = { db: Db; sql: postgres.Sql; close: () => Promise<void> };

/**
 * A pool on `url`. `changeFeed`: also LISTEN for changes to cached rows (see change-feed.ts),
 * so that services may cache API keys and deployments on this pool. `statementTimeoutMs`: the
 * longest any statement may run (and a transaction may sit idle: 2×) on this pool's connections.
 */
export function connect(
  url: string,
  options: { max?: number; changeFeed?: boolean; statementTimeoutMs?: number } = {},
): DbHandle {
  const timeouts = options.statementTimeoutMs
    ? {
        statement_timeout: options.statementTimeoutMs,
        idle_in_transaction_session_timeout: 2 * options.statementTimeoutMs,
      }
    : {};
  const sql = postgres(url, {
    max: options.max ?? 10,
    onnotice: () => {},
    connection: { application_name: "lmplatform", ...timeouts },
  });
  const db = drizzle(sql, { schema });
  const feed = options.changeFeed ? new ChangeFeed(url) : undefined;
  if (feed) attachChangeFeed(sql, feed);
  return {
    db,
    sql,
    close: async () => {
      await feed?.close();
      await sql.end({ timeout: 5 });
    },
  };
}

const globalForDb = globalThis as unknown as { __lmpDb?: DbHandle };

/** The process-wide connection pool (one per process, survives Next.js hot reloads). */
export function getDb(): DbHandle {
  if (!globalForDb.__lmpDb) {
    globalForDb.__lmpDb = connect(resolveDatabaseUrl(), {
      changeFeed: true,
      statementTimeoutMs: env().DB_STATEMENT_TIMEOUT_MS,
    });
  }
  return globalForDb.__lmpDb;
}

export { schema };
