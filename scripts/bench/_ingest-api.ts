// The ingest bench's figures for issue 18's API (called by ingest.ts):
//  - add-batch of 1,000 samples at a few clients, in samples/s (beside add's, at 32 clients);
//  - an import of JSONL lines through the API and a worker (POST to READY), in samples/s, beside
//    COPY FROM of the same rows (samples and their labels) through the same driver;
//  - a 50-sample page after 90% of the pipeline by cursor, against the first page.
import { spawn } from "node:child_process";
import { finished } from "node:stream/promises";
import postgres from "postgres";
import { workerProcessArgs } from "../lib/app-process";
import { repoRoot } from "../lib/build";
import { latencies, percentile, request, throughput } from "./_harness";

type Auth = Record<string, string>;

/** Samples per second through add-batch (1,000 per request) at `clients` concurrent clients. */
export async function batchSamplesPerSecond(base: string, pipelineId: string, auth: Auth, seconds: number) {
  let n = 0;
  const body = () =>
    JSON.stringify({
      samples: Array.from({ length: 1000 }, () => {
        const i = n++;
        return {
          messages: [
            { role: "user", content: `question ${i}` },
            { role: "assistant", content: `answer ${i}` },
          ],
          userId: `u${i % 100}`,
          metadata: { lang: i % 2 ? "en" : "fr" },
        };
      }),
    });
  const call = async () => {
    const r = await request(`${base}/v1/pipelines/${pipelineId}/add-batch`, {
      method: "POST",
      headers: auth,
      body: body(),
    });
    if (r.status === 200 && r.body.includes('"error"')) throw new Error(`batch item refused: ${r.body.slice(0, 300)}`);
    return r;
  };
  await throughput(4, 1, call);
  let best = 0;
  for (let round = 0; round < 3; round++) best = Math.max(best, (await throughput(4, seconds / 3, call)) * 1000);
  return best;
}

/** The JSONL of `n` add bodies, as the import bench sends them. */
function importLines(n: number): string {
  let out = "";
  for (let i = 0; i < n; i++) {
    out += `${JSON.stringify({
      messages: [
        { role: "user", content: `imported question ${i}` },
        { role: "assistant", content: `imported answer ${i}` },
      ],
      userId: `u${i % 100}`,
      metadata: { lang: i % 2 ? "en" : "fr" },
    })}\n`;
  }
  return out;
}

/** Samples per second of an import of `n` lines: from the POST to READY, one worker storing it. */
export async function importSamplesPerSecond(
  base: string,
  databaseUrl: string,
  pipelineId: string,
  auth: Auth,
  n: number,
) {
  const worker = await startWorker(databaseUrl);
  try {
    const text = importLines(n);
    const t0 = performance.now();
    const res = await request(`${base}/v1/pipelines/${pipelineId}/import`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/x-ndjson" },
      body: text,
    });
    if (res.status !== 202) throw new Error(`import refused: ${res.status} ${res.body}`);
    const id = (JSON.parse(res.body) as { id: string }).id;
    for (;;) {
      const state = JSON.parse((await request(`${base}/v1/imports/${id}`, { headers: auth })).body);
      if (state.status === "FAILED") throw new Error(`import failed: ${state.error}`);
      if (state.status === "READY") {
        if (state.imported !== n) throw new Error(`import stored ${state.imported} of ${n}`);
        break;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    return n / ((performance.now() - t0) / 1000);
  } finally {
    await worker.stop();
  }
}

/**
 * COPY FROM of the same rows an import of `n` lines stores (samples, then their labels), through
 * the same driver (postgres.js), in samples per second.
 */
export async function copyInSamplesPerSecond(databaseUrl: string, pipelineId: string, teamId: string, n: number) {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    const esc = (s: string) => s.replace(/\\/g, "\\\\").replace(/\t/g, "\\t").replace(/\n/g, "\\n");
    const t0 = performance.now();
    const ids: string[] = [];
    const samples =
      await sql`copy samples (id, pipeline_id, team_id, messages, length, user_id, group_id, metadata) from stdin`.writable();
    for (let i = 0; i < n; i++) {
      const id = `smp_copy${String(i).padStart(16, "0")}`;
      ids.push(id);
      const messages = JSON.stringify([
        { role: "user", content: `imported question ${i}` },
        { role: "assistant", content: `imported answer ${i}` },
      ]);
      const metadata = JSON.stringify({ lang: i % 2 ? "en" : "fr" });
      const line = [id, pipelineId, teamId, esc(messages), "2", `u${i % 100}`, "\\N", esc(metadata)].join("\t") + "\n";
      if (!samples.write(line)) await new Promise((r) => samples.once("drain", r));
    }
    samples.end();
    await finished(samples);
    await sql`
      insert into sample_labels (pipeline_id, key, value, created_at, sample_id)
      select s.pipeline_id, kv.key, kv.value, s.created_at, s.id from samples s, jsonb_each_text(s.metadata) kv
      where s.pipeline_id = ${pipelineId}`;
    return n / ((performance.now() - t0) / 1000);
  } finally {
    await sql.end();
  }
}

/** p50 of a 50-sample page after the sample at 90% of the pipeline (by cursor) ÷ p50 of the first page. */
export async function deepPageVsFirst(base: string, pipelineId: string, auth: Auth, total: number) {
  const deepId = `smp_bench${String(Math.floor(total * 0.9)).padStart(12, "0")}`;
  const page = (body: object) => async () => {
    const r = await request(`${base}/v1/pipelines/${pipelineId}/samples`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ ...body, limit: 50 }),
    });
    const rows = r.status === 200 ? (JSON.parse(r.body) as unknown[]).length : -1;
    if (rows !== Math.min(50, total - Math.floor(total * 0.9))) throw new Error(`page failed: ${r.status} ${rows}`);
  };
  await latencies(5, page({}));
  await latencies(5, page({ after: deepId }));
  const first = percentile(await latencies(50, page({})), 50);
  const deep = percentile(await latencies(50, page({ after: deepId })), 50);
  return { firstMs: first, deepMs: deep, ratio: deep / first };
}

async function startWorker(databaseUrl: string) {
  const child = spawn(process.execPath, workerProcessArgs(), {
    cwd: repoRoot,
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      AUTH_SECRET: "bench-secret-0123456789-0123456789-abc",
      WORKER_MODELS: "",
      IMPORT_POLL_MS: "50",
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  for (const deadline = Date.now() + 60_000; !out.includes(" serving http");) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`worker did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}
