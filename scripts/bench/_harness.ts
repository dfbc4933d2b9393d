// Shared pieces of the benchmarks: a throwaway database on the real Postgres, the production
// app started against it, a keep-alive HTTP load generator and percentile helpers.
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import http from "node:http";
import postgres from "postgres";
import { freePort } from "@/lib/net/free-port";
import { appProcessArgs, workerProcessArgs } from "../lib/app-process";
import { ensureBuild, repoRoot } from "../lib/build";
import { createScratchDatabase, startThrowawayDb } from "@/lib/db/throwaway";

export const benchDatabaseUrl = () =>
  process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

/**
 * A fresh, migrated database for a benchmark, dropped by `drop()`: on the system Postgres
 * (BENCH_DATABASE_URL, else TEST_DATABASE_URL, else 127.0.0.1:5432), or with `--embedded` in the
 * bench's arguments on a throwaway embedded PostgreSQL, as `npm start` runs it (durable settings).
 */
export async function freshDatabase(
  label: string,
  args: string[] = [],
): Promise<{ url: string; kind: "embedded" | "system"; drop: () => Promise<void> }> {
  if (args.includes("--embedded")) {
    const server = await startThrowawayDb({ durable: true });
    const db = await createScratchDatabase(server.url, `bench_${label}`);
    return {
      url: db.url,
      kind: "embedded",
      drop: async () => {
        await db.drop();
        await server.stop();
      },
    };
  }
  const db = await createScratchDatabase(benchDatabaseUrl(), `bench_${label}`);
  return { ...db, kind: "system" };
}

export { freePort };

/** Limits a benchmark's team never reaches. */
export const UNLIMITED = { requestsPerMinute: 100_000_000, tokensPerMinute: 100_000_000, concurrentStreams: 10_000 };

/** The production build (the app server of `npm start`) against `databaseUrl`. */
export async function startProductionApp(
  databaseUrl: string,
  env: Record<string, string> = {},
): Promise<{ base: string; pid: number; stop: () => Promise<void> }> {
  ensureBuild();
  const port = await freePort();
  const child: ChildProcess = spawn(
    process.execPath,
    [
      // e.g. BENCH_APP_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the app under load
      ...(process.env.BENCH_APP_NODE_ARGS?.split(" ").filter(Boolean) ?? []),
      ...appProcessArgs(port),
    ],
    {
      cwd: repoRoot,
      env: {
        ...process.env,
        NODE_ENV: "production",
        DATABASE_URL: databaseUrl,
        AUTH_SECRET: "bench-secret-0123456789-0123456789-abc",
        PUBLIC_URL: `http://127.0.0.1:${port}`,
        NEXT_TELEMETRY_DISABLED: "1",
        ...env,
      },
      stdio: ["ignore", "ignore", "inherit"],
    },
  );
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${base}/api/health`)).ok) break;
    } catch {
      if (i > 300) throw new Error("app did not start");
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  return {
    base,
    pid: child.pid!,
    stop: () =>
      new Promise((resolve) => {
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

/**
 * One HTTP request on a keep-alive agent; resolves with the response as soon as its head has
 * arrived (a stream to read). The benches' client is Node's own HTTP client, the leanest one
 * here: it shares the machine's two cores with the servers it measures.
 */
export function openRequest(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    // A body goes with its Content-Length in one write, as curl, fetch and the SDKs send JSON
    // (without it Node's client would fall back to chunked encoding and an extra packet).
    const headers = options.body
      ? { ...options.headers, "content-length": String(Buffer.byteLength(options.body)) }
      : options.headers;
    const req = http.request(url, { method: options.method ?? "GET", headers, agent }, resolve);
    req.on("error", reject);
    req.end(options.body);
  });
}

/** One HTTP request on a keep-alive agent; resolves with the status and body text. */
export async function request(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; body: string }> {
  const res = await openRequest(url, options);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on("data", (c: Buffer) => chunks.push(c));
    res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
    res.on("error", reject);
  });
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime + stime, in clock ticks (USER_HZ 100)
}

/** Read and write system calls a process has made so far (`/proc/<pid>/io`; each socket read or send is one). */
export function syscalls(pid: number): { reads: number; writes: number } {
  const io = readFileSync(`/proc/${pid}/io`, "utf8");
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, "m").exec(io)?.[1] ?? NaN);
  return { reads: field("syscr"), writes: field("syscw") };
}

/** `clients` concurrent loops calling `fn` for `seconds`; returns requests per second (all must succeed). */
export async function throughput(
  clients: number,
  seconds: number,
  fn: () => Promise<{ status: number }>,
): Promise<number> {
  const deadline = performance.now() + seconds * 1000;
  let done = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < deadline) {
        const r = await fn();
        if (r.status !== 200) throw new Error(`request failed with ${r.status}`);
        done++;
      }
    }),
  );
  return done / ((performance.now() - start) / 1000);
}

export async function latencies(n: number, fn: () => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn();
    out.push(performance.now() - t);
  }
  return out;
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export const round = (x: number, digits = 2) => Number(x.toFixed(digits));

/**
 * `total` samples in one pipeline, inserted by Postgres itself, with the labels `add` writes
 * (see lib/db/schema/pipelines.ts): users u0..u999, groups g0..g99, metadata lang (10 values,
 * 10% each) and {"rare":"yes"} on one sample in 1,000; every message holds "question" or "answer"
 * (common search terms), one sample in 1,000 the word "zebra" (a rare one). Then VACUUM ANALYZE,
 * as a live table has.
 */
export async function insertBenchSamples(
  url: string,
  pipelineId: string,
  teamId: string,
  total: number,
): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  const langs = ["en", "fr", "de", "es", "it", "pt", "nl", "sv", "pl", "ja"];
  await sql`
    insert into samples (id, pipeline_id, team_id, messages, length, user_id, group_id, metadata, created_at)
    select 'smp_bench' || lpad(g::text, 12, '0'), ${pipelineId}, ${teamId},
           jsonb_build_array(jsonb_build_object('role','user','content','question ' || g
                               || case when g % 1000 = 7 then ' about the zebra crossing' else '' end),
                             jsonb_build_object('role','assistant','content','answer ' || g)),
           2, 'u' || (g % 1000), 'g' || (g % 100),
           jsonb_build_object('lang', (string_to_array(${langs.join(",")}, ','))[1 + g % 10])
             || case when g % 1000 = 0 then '{"rare":"yes"}'::jsonb else '{}'::jsonb end,
           now() - interval '1 day' + g * interval '1 millisecond'
    from generate_series(1, ${total}) g`;
  await sql`
    insert into sample_labels (pipeline_id, key, value, created_at, sample_id)
    select s.pipeline_id, kv.key, kv.value, s.created_at, s.id
    from samples s, jsonb_each_text(s.metadata) kv
    where s.pipeline_id = ${pipelineId}`;
  await sql`vacuum analyze samples`;
  await sql`vacuum analyze sample_labels`;
  await sql.end();
}

/** Reads a whole POST stream:true response; returns the completion tokens of its usage event. */
export async function httpStreamTokens(url: string, key: string, body: Record<string, unknown>): Promise<number> {
  const res = await request(url, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ ...body, stream: true }),
  });
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${res.body}`);
  const usage = /"completion_tokens":(\d+)/.exec(res.body);
  if (!usage || !res.body.trimEnd().endsWith("data: [DONE]"))
    throw new Error(`incomplete stream: ${res.body.slice(-200)}`);
  return Number(usage[1]);
}

/**
 * A worker process serving `model` on the bench's database, without a prompt cache; resolves once
 * it has registered.
 */
export async function startWorkerProcess(
  databaseUrl: string,
  dataDir: string,
  model: string,
  authSecret: string,
): Promise<ChildProcess> {
  const child = spawn(process.execPath, workerProcessArgs(), {
    cwd: repoRoot,
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      AUTH_SECRET: authSecret,
      DATA_DIR: dataDir,
      WORKER_MODELS: model,
      WORKER_HEARTBEAT_SECONDS: "1",
      // The benches time each prompt's computation: their repeated prompts would come from the cache.
      WORKER_PROMPT_CACHE_MB: "0",
    },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    for (let i = 0; ; i++) {
      if (child.exitCode !== null) throw new Error("the worker exited during start-up");
      const rows = await sql`select 1 from workers where pid = ${child.pid!} and address is not null`;
      if (rows.length > 0) return child;
      if (i > 600) throw new Error("the worker did not register");
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await sql.end();
  }
}

/** Stops a worker started by startWorkerProcess (SIGTERM) and waits for it; nothing if it is gone. */
export async function stopWorkerProcess(worker: ChildProcess | undefined): Promise<void> {
  if (!worker || worker.exitCode !== null) return;
  const exited = new Promise((r) => worker.once("exit", r));
  worker.kill("SIGTERM");
  await exited;
}
