// npm run bench -- ingest [--samples N] [--seconds S]
// On the production build and the real Postgres:
//  1. `add` requests/s at 32 concurrent clients ÷ requests/s of an empty route of the same app,
//     and metrics_overhead: add requests/s on an app with METRICS=off ÷ the same with metrics on
//     (two fresh apps loaded at the same time, 16 clients each);
//  2. with N (default 1,000,000) samples in one pipeline: median latency of a 50-sample page
//     filtered by one metadata key, and of the matching count;
//  3. the same for each metadata operator ($ne, $in, $exists both ways, $prefix: the worst is
//     op_*), a date range, a rare search term (0.1% of samples) and a common one (every sample).
//     With --explain, the query plans of those pages and counts.
//  4. add-batch (1,000 samples a request) in samples/s ÷ add's at 32 clients; an import of
//     --import-lines (default 100,000) through the API and a worker beside COPY FROM of the same
//     rows; a 50-sample page after 90% of the N samples by cursor ÷ the first page
//     (scripts/bench/_ingest-api.ts).
import { parseArgs } from "node:util";
import { sql } from "drizzle-orm";
import { connect } from "@/lib/db/client";
import { createApiKey } from "@/lib/services/api-keys";
import { createPipeline } from "@/lib/services/pipelines";
import { createTeam, setTeamLimits } from "@/lib/services/teams";
import {
  freshDatabase,
  insertBenchSamples,
  latencies,
  cpuSeconds,
  percentile,
  request,
  round,
  startProductionApp,
  throughput,
  UNLIMITED,
} from "./_harness";
import { explainSelections } from "./explain-selections";
import { batchSamplesPerSecond, copyInSamplesPerSecond, deepPageVsFirst, importSamplesPerSecond } from "./_ingest-api";

/** A Postgres timestamptz's text as ISO 8601 with its offset (microseconds kept). */
const isoOf = (pg: string) => pg.replace(" ", "T").replace(/([+-]\d\d)$/, "$1:00");

export default async function ingest(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      samples: { type: "string", default: "1000000" },
      seconds: { type: "string", default: "15" },
      embedded: { type: "boolean" },
      explain: { type: "boolean" },
      "import-lines": { type: "string", default: "100000" },
    },
  });
  const total = Number(values.samples);
  const seconds = Number(values.seconds);
  const db = await freshDatabase("ingest", argv);
  const app = await startProductionApp(db.url);
  const handle = connect(db.url, { max: 2 });
  try {
    const team = await createTeam(handle.db, { slug: "bench" });
    // The bench measures the app's throughput with one key, far past the default per-key limits.
    await setTeamLimits(handle.db, { teamId: team.id, limits: UNLIMITED });
    const { secret } = await createApiKey(handle.db, { teamId: team.id, kind: "api" });
    const auth = { authorization: `Bearer ${secret}`, "content-type": "application/json" };
    const addTarget = await createPipeline(handle.db, { teamId: team.id, name: "add target" });

    // --- 1. add vs an empty route, 32 concurrent clients, after a warm-up of each.
    const empty = () => request(`${app.base}/api/health/live`);
    let i = 0;
    const addBody = () => ({
      method: "POST",
      headers: auth,
      body: JSON.stringify({
        messages: [
          { role: "user", content: `question ${i}` },
          { role: "assistant", content: `answer ${i}` },
        ],
        userId: `u${i % 100}`,
        metadata: { lang: i++ % 2 ? "en" : "fr" },
      }),
    });
    const add = () => request(`${app.base}/v1/pipelines/${addTarget.id}/add`, addBody());
    await throughput(32, 2, empty);
    await throughput(32, 2, add);
    // Alternating rounds, best of each: load from elsewhere on a shared machine hits both alike.
    // Also the app's own CPU time per request (less sensitive to other load than req/s).
    const measured = async (fn: typeof empty) => {
      const cpu0 = cpuSeconds(app.pid);
      const t0 = performance.now();
      const rps = await throughput(32, seconds / 3, fn);
      const requests = (rps * (performance.now() - t0)) / 1000;
      return { rps, cpuMs: ((cpuSeconds(app.pid) - cpu0) * 1000) / requests };
    };
    let emptyRps = 0;
    let addRps = 0;
    let emptyCpuMs = Infinity;
    let addCpuMs = Infinity;
    for (let round = 0; round < 3; round++) {
      const e = await measured(empty);
      const a = await measured(add);
      [emptyRps, emptyCpuMs] = [Math.max(emptyRps, e.rps), Math.min(emptyCpuMs, e.cpuMs)];
      [addRps, addCpuMs] = [Math.max(addRps, a.rps), Math.min(addCpuMs, a.cpuMs)];
    }
    console.log(
      `empty route: ${emptyRps.toFixed(0)} req/s   add: ${addRps.toFixed(0)} req/s   (32 clients, best of 3 alternating rounds)`,
    );
    console.log(
      `app CPU per request: empty route ${emptyCpuMs.toFixed(3)} ms   add ${addCpuMs.toFixed(3)} ms   (ratio ${(emptyCpuMs / addCpuMs).toFixed(2)})`,
    );

    // --- 1b. What the metrics cost: add on two fresh apps, one with METRICS=off, measured at the
    // same time (16 clients each), so that background load on this shared machine hits both alike
    // (measured one after the other, two identical fresh apps differed by up to 15% in req/s).
    // The long-running main app above is left out: its warmer JIT and caches would favour it.
    const withMetrics = await startProductionApp(db.url, {});
    const plain = await startProductionApp(db.url, { METRICS: "off" });
    let onRps = 0;
    let offRps = 0;
    let onCpuMs = 0;
    let offCpuMs = 0;
    try {
      const addOn = () => request(`${withMetrics.base}/v1/pipelines/${addTarget.id}/add`, addBody());
      const addOff = () => request(`${plain.base}/v1/pipelines/${addTarget.id}/add`, addBody());
      await Promise.all([throughput(16, 2, addOn), throughput(16, 2, addOff)]);
      const cpu0 = { on: cpuSeconds(withMetrics.pid), off: cpuSeconds(plain.pid) };
      const t0 = performance.now();
      [onRps, offRps] = await Promise.all([throughput(16, seconds, addOn), throughput(16, seconds, addOff)]);
      const elapsed = (performance.now() - t0) / 1000;
      onCpuMs = ((cpuSeconds(withMetrics.pid) - cpu0.on) * 1000) / (onRps * elapsed);
      offCpuMs = ((cpuSeconds(plain.pid) - cpu0.off) * 1000) / (offRps * elapsed);
    } finally {
      await Promise.all([withMetrics.stop(), plain.stop()]);
    }
    console.log(
      `app CPU per add: with metrics ${onCpuMs.toFixed(3)} ms   without ${offCpuMs.toFixed(3)} ms (ratio ${(onCpuMs / offCpuMs).toFixed(2)})`,
    );
    console.log(`add with metrics: ${onRps.toFixed(0)} req/s   without: ${offRps.toFixed(0)} req/s`);

    // --- 4a. add-batch against add (samples/s), and an import against COPY FROM.
    const batchTarget = await createPipeline(handle.db, { teamId: team.id, name: "batch target" });
    const batchSps = await batchSamplesPerSecond(app.base, batchTarget.id, auth, seconds);
    console.log(
      `add-batch: ${batchSps.toFixed(0)} samples/s (4 clients, 1,000 a request)   add: ${addRps.toFixed(0)} samples/s`,
    );
    const importLinesN = Number(values["import-lines"]);
    const importTarget = await createPipeline(handle.db, { teamId: team.id, name: "import target" });
    const importSps = await importSamplesPerSecond(app.base, db.url, importTarget.id, auth, importLinesN);
    const copyTarget = await createPipeline(handle.db, { teamId: team.id, name: "copy target" });
    const copySps = await copyInSamplesPerSecond(db.url, copyTarget.id, team.id, importLinesN);
    console.log(
      `import of ${importLinesN} lines: ${importSps.toFixed(0)} samples/s   COPY FROM of the same rows: ${copySps.toFixed(0)} samples/s`,
    );

    // --- 2. a pipeline with `total` samples, inserted by Postgres itself.
    const big = await createPipeline(handle.db, { teamId: team.id, name: "big" });
    const t0 = performance.now();
    await insertBenchSamples(db.url, big.id, team.id, total);
    console.log(`inserted ${total} samples in ${((performance.now() - t0) / 1000).toFixed(1)}s`);

    const post = (op: "samples" | "count", body: object) =>
      request(`${app.base}/v1/pipelines/${big.id}/${op}`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify(body),
      });
    /** A page of 50 (fewer when the selection has fewer: `--samples` below 50,000). */
    const pageOf =
      (body: object, matching = Infinity) =>
      async () => {
        const r = await post("samples", { ...body, limit: 50 });
        const rows = r.status === 200 ? (JSON.parse(r.body) as unknown[]).length : -1;
        if (rows !== Math.min(50, matching)) throw new Error(`page failed: ${r.status}, ${rows} rows`);
      };
    const countOf = (body: object, expected: number) => async () => {
      const r = await post("count", body);
      if (r.status !== 200 || (JSON.parse(r.body) as { count: number }).count !== expected) {
        throw new Error(`count failed: ${r.status} ${r.body}, expected ${expected} for ${JSON.stringify(body)}`);
      }
    };
    const page = (metadata: Record<string, string>, extra: Record<string, string> = {}) =>
      pageOf({ metadata, ...extra }, metadata.rare || extra.userId ? Math.floor(total / 1000) : total / 10);
    const count = (metadata: Record<string, string>, expected: number, extra: Record<string, string> = {}) =>
      countOf({ metadata, ...extra }, expected);
    await latencies(5, page({ lang: "en" }));
    const pageMs = percentile(await latencies(50, page({ lang: "en" })), 50);
    const pageRareMs = percentile(await latencies(20, page({ rare: "yes" })), 50);
    await latencies(2, count({ lang: "en" }, total / 10));
    const countMs = percentile(await latencies(20, count({ lang: "en" }, total / 10)), 50);
    const countRareMs = percentile(await latencies(20, count({ rare: "yes" }, Math.floor(total / 1000))), 50);
    // A metadata key and a user together (user u10's samples all have lang "en": 0.1%).
    const both = [{ lang: "en" }, { userId: "u10" }] as const;
    const pageBothMs = percentile(await latencies(20, page(...both)), 50);
    const countBothMs = percentile(await latencies(20, count(both[0], Math.floor(total / 1000), both[1])), 50);
    console.log(`page of 50, metadata {lang:"en"} (10% of samples): p50 ${pageMs.toFixed(1)} ms`);
    console.log(`page of 50, metadata {rare:"yes"} (0.1%):          p50 ${pageRareMs.toFixed(1)} ms`);
    console.log(`count, metadata {lang:"en"}:                        p50 ${countMs.toFixed(1)} ms`);
    console.log(`count, metadata {rare:"yes"}:                       p50 ${countRareMs.toFixed(1)} ms`);
    console.log(`page of 50, metadata {lang:"en"} + userId "u10":    p50 ${pageBothMs.toFixed(1)} ms`);
    console.log(`count, metadata {lang:"en"} + userId "u10":         p50 ${countBothMs.toFixed(1)} ms`);

    // --- 3. operators, a date range and search (see insertBenchSamples for the data).
    const tenth = total / 10;
    const rare = Math.floor(total / 1000);
    const [range] = await handle.db.execute<{ after: string; before: string; n: number }>(sql`
      select (percentile_disc(0.3) within group (order by created_at))::text as after,
             (percentile_disc(0.6) within group (order by created_at))::text as before, 0 as n
      from samples where pipeline_id = ${big.id}`);
    const rangeBody = { createdAfter: isoOf(range!.after), createdBefore: isoOf(range!.before) };
    const [inRange] = await handle.db.execute<{ n: number }>(sql`
      select count(*)::int as n from samples where pipeline_id = ${big.id}
      and created_at > ${rangeBody.createdAfter}::timestamptz and created_at < ${rangeBody.createdBefore}::timestamptz`);
    const operators: [string, object, number][] = [
      ["$ne", { metadata: { lang: { $ne: "en" } } }, total - tenth],
      ["$in", { metadata: { lang: { $in: ["en", "fr"] } } }, 2 * tenth],
      ["$exists", { metadata: { rare: { $exists: true } } }, rare],
      ["$exists:false", { metadata: { rare: { $exists: false } } }, total - rare],
      ["$prefix", { metadata: { lang: { $prefix: "e" } } }, 2 * tenth],
    ];
    const p50 = async (fn: () => Promise<void>, n = 20) => {
      await latencies(2, fn);
      return percentile(await latencies(n, fn), 50);
    };
    const opFigures: { name: string; page: number; count: number }[] = [];
    for (const [name, body, expected] of operators) {
      opFigures.push({ name, page: await p50(pageOf(body, expected)), count: await p50(countOf(body, expected)) });
    }
    for (const f of opFigures) {
      console.log(`${f.name.padEnd(14)} page p50 ${f.page.toFixed(1)} ms   count p50 ${f.count.toFixed(1)} ms`);
    }
    const rangePageMs = await p50(pageOf(rangeBody, inRange!.n));
    const rangeCountMs = await p50(countOf(rangeBody, inRange!.n));
    const searchRarePageMs = await p50(pageOf({ search: "zebra" }, rare));
    const searchRareCountMs = await p50(countOf({ search: "zebra" }, rare));
    const searchCommonPageMs = await p50(pageOf({ search: "question" }));
    console.log(
      `date range (30%–60%): page p50 ${rangePageMs.toFixed(1)} ms   count p50 ${rangeCountMs.toFixed(1)} ms`,
    );
    console.log(
      `search "zebra" (0.1%): page p50 ${searchRarePageMs.toFixed(1)} ms   count p50 ${searchRareCountMs.toFixed(1)} ms`,
    );
    console.log(`search "question" (every sample): first page p50 ${searchCommonPageMs.toFixed(1)} ms (goal ≤ 100)`);
    if (values.explain) {
      await explainSelections(db.url, big.id, [
        ...operators.map(([name, body]) => [name, body] as [string, object]),
        ["range", rangeBody],
        ["search rare", { search: "zebra" }],
        ["search common", { search: "question" }],
      ]);
    }
    const worst = (k: "page" | "count") => Math.max(...opFigures.map((f) => f[k]));
    // --- 4b. a deep page by cursor against the first page.
    const deep = await deepPageVsFirst(app.base, big.id, auth, total);
    console.log(
      `page of 50 after ${Math.floor(total * 0.9)} samples by cursor: p50 ${deep.deepMs.toFixed(1)} ms   first page: p50 ${deep.firstMs.toFixed(1)} ms`,
    );

    console.log(
      JSON.stringify({
        bench: "ingest",
        add_vs_empty_route: round(addRps / emptyRps),
        metrics_overhead: round(offRps / onRps),

        batch_samples_per_s_vs_add: round(batchSps / addRps),
        import_samples_per_s: round(importSps, 0),
        copy_in_samples_per_s: round(copySps, 0),
        import_vs_copy: round(importSps / copySps),
        deep_page_vs_first: round(deep.ratio),
        deep_page_p50_ms: round(deep.deepMs, 1),
        first_page_p50_ms: round(deep.firstMs, 1),
        batch_samples_per_s: round(batchSps, 0),
        page_p50_ms: round(pageMs, 1),
        count_p50_ms: round(countMs, 1),
        samples: total,
        add_rps: round(addRps, 0),
        empty_route_rps: round(emptyRps, 0),
        add_cpu_ms: round(addCpuMs, 3),
        empty_route_cpu_ms: round(emptyCpuMs, 3),
        page_rare_p50_ms: round(pageRareMs, 1),
        count_rare_p50_ms: round(countRareMs, 1),
        page_meta_user_p50_ms: round(pageBothMs, 1),
        count_meta_user_p50_ms: round(countBothMs, 1),
        op_page_p50_ms: round(worst("page"), 1),
        op_count_p50_ms: round(worst("count"), 1),
        range_page_p50_ms: round(rangePageMs, 1),
        search_rare_page_p50_ms: round(searchRarePageMs, 1),
        search_rare_count_p50_ms: round(searchRareCountMs, 1),
        search_common_page_p50_ms: round(searchCommonPageMs, 1),
        range_count_p50_ms: round(rangeCountMs, 1),
        ...Object.fromEntries(
          opFigures.flatMap((f) => [
            [`op_${f.name.replace(/[$:]/g, "")}_page_p50_ms`, round(f.page, 1)],
            [`op_${f.name.replace(/[$:]/g, "")}_count_p50_ms`, round(f.count, 1)],
          ]),
        ),
      }),
    );
  } finally {
    await handle.close();
    await app.stop();
    await db.drop();
  }
}
