// `npm run bench -- ingest --explain`: the plans (EXPLAIN ANALYZE) of the page and count queries
// the API runs for each selection, built by the same code (lib/services/selection-query.ts).
import { sql } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import postgres from "postgres";
import { SelectionBody } from "@/lib/contracts/pipelines";
import { selectionRows, selectionSource, whereOf } from "@/lib/services/selection-query";

export async function explainSelections(url: string, pipelineId: string, cases: [string, object][]): Promise<void> {
  const raw = postgres(url, { max: 1, onnotice: () => {} });
  const dialect = new PgDialect();
  try {
    for (const [name, body] of cases) {
      const selection = SelectionBody.parse(body);
      const rows = selectionRows(pipelineId, selection, { withSamples: true });
      const counted = selectionSource(pipelineId, selection, false);
      const queries = {
        page: sql`select s.id from ${rows.from} ${whereOf(rows)} order by ${rows.ts}, ${rows.id} limit 50`,
        // (count: `$ne` and `$exists: false` alone are counted as differences; this is the direct form)
        count: sql`select count(*) from ${counted.from} ${whereOf(counted)}`,
      };
      for (const [kind, query] of Object.entries(queries)) {
        const q = dialect.sqlToQuery(query);
        const plan = await raw.unsafe(`explain (analyze, costs off) ${q.sql}`, q.params as never[]);
        console.log(`\n--- ${name} ${kind}\n${plan.map((r) => r["QUERY PLAN"]).join("\n")}`);
      }
    }
  } finally {
    await raw.end();
  }
}
