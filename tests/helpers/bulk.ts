import { samples } from "@/lib/db/schema";
import { newId } from "@/lib/ids";
import { db } from "./context";

/** Inserts n samples straight into the database with increasing created_at; returns ids in order. */
export async function addSamplesDirect(teamId: string, pipelineId: string, n: number): Promise<string[]> {
  const base = Date.now() - n * 1000;
  const rows = Array.from({ length: n }, (_, i) => ({
    id: newId("sample"),
    pipelineId,
    teamId,
    messages: [{ role: "user" as const, content: `bulk ${i}` }],
    length: 1,
    userId: `u${i % 10}`,
    createdAt: new Date(base + i),
  }));
  for (let i = 0; i < rows.length; i += 500)
    await db()
      .db.insert(samples)
      .values(rows.slice(i, i + 500));
  return rows.map((r) => r.id);
}
