// Shared pieces of the benchmarks: a throwaway database on the real Postgres, the production
// app started against it, a keep-alive HTTP load generator and percentile helpers.
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import http from "node:http";
import { createServer } from "node:net";
import postgres from "postgres";
import { migrateDatabase } from "@/lib/db/migrate";
import { appProcessArgs } from "../lib/app-process";
import { ensureBuild, repoRoot } from "../lib/build";

export const benchDatabaseUrl = () =>
  process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

/** A fresh database on the real Postgres server, migrated; dropped by `drop()`. */
export async function freshDatabase(label: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const admin = postgres(benchDatabaseUrl(), { max: 1, onnotice: () => {} });
  const name = `lmp_bench_${label}_${Date.now()}`;
  await admin.unsafe(`create database ${name}`);
  const url = new URL(benchDatabaseUrl());
  url.pathname = `/${name}`;
  await migrateDatabase(url.toString());
  return {
    url: url.toString(),
    drop: async () => {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    },
  };
}

export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = createServer().listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/** The production build (`next start`) against `databaseUrl`. */
export async function startProductionApp(
  databaseUrl: string,
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
 * 10% each) and {"rare":"yes"} on one sample in 1,000. Then VACUUM ANALYZE, as a live table has.
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
           jsonb_build_array(jsonb_build_object('role','user','content','question ' || g),
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
