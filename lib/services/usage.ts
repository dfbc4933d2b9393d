import { sql } from "drizzle-orm";
import type { DbOrTx } from "../db/client";
import { env } from "../env";
import type { UsageDashboard } from "../contracts/usage";
import { logger } from "../observe/log";
import { drainOnStop } from "../observe/stop-drain";

/**
 * Usage accounting: every completion counts its prompt and completion tokens (and, streamed, its
 * time to first token) for its team, key, deployment and day (UTC). Counts are summed in memory
 * and written every USAGE_FLUSH_MS in one statement (an upsert that adds to the day's row), off
 * the request path; a failed write keeps its counts for the next one. Per app process, kept on
 * globalThis (Next.js loads the App and Pages Router bundles separately).
 */
export const USAGE_TTFT_BOUNDS_MS = [25, 50, 100, 200, 400, 800, 1600, 3200, 6400, 12800] as const;

export type CompletionUsage = {
  teamId: string;
  keyId: string | null;
  deploymentId: string;
  promptTokens: number;
  completionTokens: number;
  ttftMs?: number;
};

type Row = {
  day: string;
  team_id: string;
  key_id: string;
  deployment_id: string;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  ttft_count: number;
  ttft_sum_ms: number;
  ttft_histogram: number[];
};

type Recorder = { pending: Map<string, Row>; timer?: NodeJS.Timeout; db?: DbOrTx; flushing?: Promise<void> };
const holder = globalThis as unknown as { __lmpUsage?: Recorder };
const recorder: Recorder = (holder.__lmpUsage ??= { pending: new Map() });

/** Counts one completion; written with the next flush. */
export function recordUsage(db: DbOrTx, u: CompletionUsage): void {
  const day = new Date().toISOString().slice(0, 10);
  const key = `${day}|${u.teamId}|${u.keyId ?? ""}|${u.deploymentId}`;
  let row = recorder.pending.get(key);
  if (!row) {
    row = {
      day,
      team_id: u.teamId,
      key_id: u.keyId ?? "",
      deployment_id: u.deploymentId,
      requests: 0,
      prompt_tokens: 0,
      completion_tokens: 0,
      ttft_count: 0,
      ttft_sum_ms: 0,
      ttft_histogram: new Array<number>(USAGE_TTFT_BOUNDS_MS.length + 1).fill(0),
    };
    recorder.pending.set(key, row);
  }
  row.requests++;
  row.prompt_tokens += u.promptTokens;
  row.completion_tokens += u.completionTokens;
  if (u.ttftMs !== undefined) {
    row.ttft_count++;
    row.ttft_sum_ms += u.ttftMs;
    const bucket = USAGE_TTFT_BOUNDS_MS.findIndex((b) => u.ttftMs! <= b);
    row.ttft_histogram[bucket < 0 ? USAGE_TTFT_BOUNDS_MS.length : bucket]!++;
  }
  recorder.db = db;
  if (!recorder.timer) {
    recorder.timer = setTimeout(() => void flushUsage(), env().USAGE_FLUSH_MS).unref();
    drainOnStop("usage", flushUsage); // a stop writes what the timer has not yet
  }
}

/** Writes the counts gathered so far (also called on shutdown and by tests). */
export async function flushUsage(): Promise<void> {
  while (recorder.flushing) await recorder.flushing;
  recorder.timer = undefined;
  const db = recorder.db;
  if (!db || recorder.pending.size === 0) return;
  const rows = [...recorder.pending.values()];
  recorder.pending.clear();
  recorder.flushing = write(db, rows)
    .catch((err: unknown) => {
      // Kept for the next flush: merged back into whatever arrived meanwhile.
      logger().error({ err, rows: rows.length }, "usage write failed; retrying later");
      for (const r of rows) {
        const key = `${r.day}|${r.team_id}|${r.key_id}|${r.deployment_id}`;
        const now = recorder.pending.get(key);
        if (!now) recorder.pending.set(key, r);
        else {
          now.requests += r.requests;
          now.prompt_tokens += r.prompt_tokens;
          now.completion_tokens += r.completion_tokens;
          now.ttft_count += r.ttft_count;
          now.ttft_sum_ms += r.ttft_sum_ms;
          now.ttft_histogram = now.ttft_histogram.map((x, i) => x + r.ttft_histogram[i]!);
        }
      }
      recorder.timer ??= setTimeout(() => void flushUsage(), env().USAGE_FLUSH_MS).unref();
    })
    .finally(() => (recorder.flushing = undefined));
  await recorder.flushing;
}

async function write(db: DbOrTx, rows: Row[]): Promise<void> {
  await db.execute(sql`
    insert into usage_daily as u (day, team_id, key_id, deployment_id, requests, prompt_tokens, completion_tokens,
                                  ttft_count, ttft_sum_ms, ttft_histogram)
    select day, team_id, key_id, deployment_id, requests, prompt_tokens, completion_tokens,
           ttft_count, ttft_sum_ms, array(select jsonb_array_elements_text(ttft_histogram)::int)
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as r(
      day date, team_id text, key_id text, deployment_id text, requests int, prompt_tokens bigint,
      completion_tokens bigint, ttft_count int, ttft_sum_ms double precision, ttft_histogram jsonb)
    on conflict (team_id, day, key_id, deployment_id) do update set
      requests = u.requests + excluded.requests,
      prompt_tokens = u.prompt_tokens + excluded.prompt_tokens,
      completion_tokens = u.completion_tokens + excluded.completion_tokens,
      ttft_count = u.ttft_count + excluded.ttft_count,
      ttft_sum_ms = u.ttft_sum_ms + excluded.ttft_sum_ms,
      ttft_histogram = array(select a + b from unnest(u.ttft_histogram, excluded.ttft_histogram) as t(a, b))`);
}

export type UsageGroup = "day" | "key" | "deployment";

export type UsageRow = { requests: number; prompt_tokens: number; completion_tokens: number } & Partial<
  Record<UsageGroup, string>
>;

/** A team's usage between two days (both included), one row per group, ordered by it. */
export async function usageOf(
  db: DbOrTx,
  input: { teamId: string; from: string; to: string; groupBy: UsageGroup },
): Promise<UsageRow[]> {
  const column = { day: sql`day::text`, key: sql`key_id`, deployment: sql`deployment_id` }[input.groupBy];
  const rows = await db.execute<{ g: string; requests: number; prompt_tokens: string; completion_tokens: string }>(sql`
    select ${column} as g, sum(requests)::int as requests, sum(prompt_tokens)::text as prompt_tokens,
           sum(completion_tokens)::text as completion_tokens
    from usage_daily
    where team_id = ${input.teamId} and day between ${input.from}::date and ${input.to}::date
    group by 1 order by 1`);
  return rows.map((r) => ({
    [input.groupBy]: r.g,
    requests: r.requests,
    prompt_tokens: Number(r.prompt_tokens),
    completion_tokens: Number(r.completion_tokens),
  }));
}

/** A percentile from a histogram over USAGE_TTFT_BOUNDS_MS: the upper bound of its bucket. */
function histogramPercentile(histogram: number[], p: number): number | null {
  const total = histogram.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  let seen = 0;
  for (let i = 0; i < histogram.length; i++) {
    seen += histogram[i]!;
    if (seen >= p * total) return USAGE_TTFT_BOUNDS_MS[i] ?? 2 * USAGE_TTFT_BOUNDS_MS.at(-1)!;
  }
  return null;
}

/** What the dashboard's usage page charts: per day (every day of the range), per deployment, per key. */
export async function usageDashboard(
  db: DbOrTx,
  input: { teamId: string; from: string; to: string },
): Promise<UsageDashboard> {
  const rows = await db.execute<{
    day: string;
    key: string;
    key_name: string | null;
    dep: string;
    dep_name: string | null;
    requests: number;
    prompt_tokens: string;
    completion_tokens: string;
    ttft_histogram: number[];
  }>(sql`
    select u.day::text as day, u.key_id as key, coalesce(k.name, k.prefix || '…') as key_name,
           u.deployment_id as dep, d.name as dep_name, u.requests, u.prompt_tokens::text, u.completion_tokens::text,
           u.ttft_histogram
    from usage_daily u
    left join api_keys k on k.id = u.key_id and k.team_id = u.team_id
    left join deployments d on d.id = u.deployment_id and d.team_id = u.team_id
    where u.team_id = ${input.teamId} and u.day between ${input.from}::date and ${input.to}::date`);
  const days = new Map<string, UsageDashboard["byDay"][number]>();
  for (let t = Date.parse(`${input.from}T00:00:00Z`); t <= Date.parse(`${input.to}T00:00:00Z`); t += 86_400_000) {
    const day = new Date(t).toISOString().slice(0, 10);
    days.set(day, { day, requests: 0, promptTokens: 0, completionTokens: 0 });
  }
  const deps = new Map<string, { name: string; requests: number; tokens: number; histogram: number[] }>();
  const keys = new Map<string, UsageDashboard["byKey"][number]>();
  for (const r of rows) {
    const [prompt, completion] = [Number(r.prompt_tokens), Number(r.completion_tokens)];
    const d = days.get(r.day)!;
    d.requests += r.requests;
    d.promptTokens += prompt;
    d.completionTokens += completion;
    const dep = deps.get(r.dep) ?? { name: r.dep_name ?? `${r.dep} (deleted)`, requests: 0, tokens: 0, histogram: [] };
    dep.requests += r.requests;
    dep.tokens += prompt + completion;
    dep.histogram = r.ttft_histogram.map((x, i) => x + (dep.histogram[i] ?? 0));
    deps.set(r.dep, dep);
    const keyName = r.key === "" ? "dashboard playground" : (r.key_name ?? `${r.key} (deleted)`);
    const key = keys.get(r.key) ?? { name: keyName, requests: 0, tokens: 0 };
    key.requests += r.requests;
    key.tokens += prompt + completion;
    keys.set(r.key, key);
  }
  const byTokens = <T extends { tokens: number }>(a: T, b: T) => b.tokens - a.tokens;
  return {
    from: input.from,
    to: input.to,
    byDay: [...days.values()],
    byDeployment: [...deps.values()]
      .map(({ histogram, ...d }) => ({
        ...d,
        ttftP50Ms: histogramPercentile(histogram, 0.5),
        ttftP95Ms: histogramPercentile(histogram, 0.95),
      }))
      .sort(byTokens),
    byKey: [...keys.values()].sort(byTokens),
  };
}
