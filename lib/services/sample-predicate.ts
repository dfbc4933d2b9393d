import { sql, type SQL } from "drizzle-orm";
import type { MetadataCondition, Selection } from "../contracts/pipelines";
import { generationConditions, textArray } from "./selection-query";

/**
 * A selection's filters as a condition on one samples row `s` (its own columns, not the indexes
 * selection-query.ts drives from): for checking a few known rows against a filter, such as the
 * samples about to be deleted against each dataset's selection. `sample`, `limit`, `offset` and
 * `after` are not filters of a row and are ignored, so the condition may match more rows than
 * the selection lists, never fewer.
 */
export function samplePredicate(s: SQL, selection: Partial<Selection>): SQL {
  const parts: SQL[] = [sql`true`];
  if (selection.userId !== undefined) parts.push(sql`${s}.user_id = ${selection.userId}`);
  if (selection.groupId !== undefined) parts.push(sql`${s}.group_id = ${selection.groupId}`);
  for (const [key, c] of Object.entries(selection.metadata ?? {})) parts.push(metadataCondition(s, key, c));
  if (selection.createdAfter !== undefined) parts.push(sql`${s}.created_at > ${selection.createdAfter}::timestamptz`);
  if (selection.createdBefore !== undefined) parts.push(sql`${s}.created_at < ${selection.createdBefore}::timestamptz`);
  if (selection.generation !== undefined) parts.push(...generationConditions(s, selection.generation));
  if (selection.importId !== undefined) parts.push(sql`${s}.import_id = ${selection.importId}`);
  if (selection.search !== undefined) {
    const pattern = `%${selection.search.replace(/[\\%_]/g, (ch) => `\\${ch}`)}%`;
    parts.push(sql`exists (select 1 from jsonb_array_elements(${s}.messages) m where m->>'content' ilike ${pattern})`);
  }
  return sql.join(parts, sql` and `);
}

/** One metadata condition on the row's metadata (the labels hold the same pairs). */
function metadataCondition(s: SQL, key: string, c: MetadataCondition): SQL {
  const value = sql`(${s}.metadata ->> ${key}::text)`;
  if (typeof c === "string") return sql`${value} = ${c}`;
  if ("$ne" in c) return sql`${value} is distinct from ${c.$ne}`;
  if ("$in" in c) return sql`${value} = any(${textArray(c.$in)})`;
  if ("$exists" in c) return c.$exists ? sql`${value} is not null` : sql`${value} is null`;
  return sql`starts_with(${value}, ${c.$prefix})`;
}
