import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import { resolveDatabaseUrl } from "./url";
import * as schema from "./schema";

export type Db = PostgresJsDatabase<typeof schema>;
/** A transaction or the database itself: services accept either so they can join a caller's transaction. */
export type DbOrTx = Db | Parameters<Parameters<Db["transaction"]>[0]>[0];

export type DbHandle = { db: Db; sql: postgres.Sql; close: () => Promise<void> };

export function connect(url: string, options: { max?: number } = {}): DbHandle {
  const sql = postgres(url, {
    max: options.max ?? 10,
    onnotice: () => {},
    connection: { application_name: "lmplatform" },
  });
  const db = drizzle(sql, { schema });
  return { db, sql, close: () => sql.end({ timeout: 5 }) };
}

const globalForDb = globalThis as unknown as { __lmpDb?: DbHandle };

/** The process-wide connection pool (one per process, survives Next.js hot reloads). */
export function getDb(): DbHandle {
  if (!globalForDb.__lmpDb) globalForDb.__lmpDb = connect(resolveDatabaseUrl());
  return globalForDb.__lmpDb;
}

export { schema };
