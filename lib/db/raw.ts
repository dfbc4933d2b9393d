import type postgres from "postgres";
import type { DbOrTx } from "./client";

/**
 * The postgres.js client under a drizzle database or transaction. Hot paths (key lookup on
 * every request, `add`) use its tagged templates: they are prepared once per connection and
 * skip drizzle's query building, which cost about 1 ms of CPU per request here.
 */
export function rawSql(db: DbOrTx): postgres.Sql {
  const client =
    (db as { $client?: postgres.Sql }).$client ??
    (db as unknown as { session?: { client?: postgres.Sql } }).session?.client;
  if (!client) throw new Error("rawSql: not a postgres.js drizzle database");
  return client;
}
