// The denominator of tokenize_vs_raw (datasets bench): the packager's own token counter (the
// same tokenizer and chat template) over the same conversations, in a loop in this process. The
// conversations are read and parsed first, batch by batch; only the counting is timed.
import postgres from "postgres";
import { loadTokenCounter } from "@/workers/packager/token-counter";

export async function tokenizeLoopSeconds(url: string, pipelineId: string, model: string): Promise<number> {
  const count = await loadTokenCounter(model);
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  let seconds = 0;
  try {
    const cursor = sql<{ messages: { role: string; content: string }[] }[]>`
      select messages from samples where pipeline_id = ${pipelineId} order by created_at, id`.cursor(10_000);
    for await (const rows of cursor) {
      const t = performance.now();
      for (const r of rows) count(r.messages);
      seconds += (performance.now() - t) / 1000;
    }
  } finally {
    await sql.end();
  }
  return seconds;
}
