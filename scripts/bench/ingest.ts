// npm run bench -- ingest [--samples N] [--seconds S]
// On the production build and the real Postgres:
//  1. `add` requests/s at 32 concurrent clients ÷ requests/s of an empty route of the same app;
//  2. with N (default 1,000,000) samples in one pipeline: median latency of a 50-sample page
//     filtered by one metadata key, and of the matching count.
import { parseArgs } from "node:util";
import { connect } from "@/lib/db/client";
import { createApiKey } from "@/lib/services/api-keys";
import { createPipeline } from "@/lib/services/pipelines";
import { createTeam } from "@/lib/services/teams";
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
} from "./_harness";

export default async function ingest(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { samples: { type: "string", default: "1000000" }, seconds: { type: "string", default: "15" } },
  });
  const total = Number(values.samples);
  const seconds = Number(values.seconds);
  const db = await freshDatabase("ingest");
  const app = await startProductionApp(db.url);
  const handle = connect(db.url, { max: 2 });
  try {
    const team = await createTeam(handle.db, { slug: "bench" });
    const { secret } = await createApiKey(handle.db, { teamId: team.id, kind: "api" });
    const auth = { authorization: `Bearer ${secret}`, "content-type": "application/json" };
    const addTarget = await createPipeline(handle.db, { teamId: team.id, name: "add target" });

    // --- 1. add vs an empty route, 32 concurrent clients, after a warm-up of each.
    const empty = () => request(`${app.base}/api/health`);
    let i = 0;
    const add = () =>
      request(`${app.base}/v1/pipelines/${addTarget.id}/add`, {
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

    // --- 2. a pipeline with `total` samples, inserted by Postgres itself.
    const big = await createPipeline(handle.db, { teamId: team.id, name: "big" });
    const t0 = performance.now();
    await insertBenchSamples(db.url, big.id, team.id, total);
    console.log(`inserted ${total} samples in ${((performance.now() - t0) / 1000).toFixed(1)}s`);

    const page =
      (metadata: Record<string, string>, extra: Record<string, string> = {}) =>
      async () => {
        const r = await request(`${app.base}/v1/pipelines/${big.id}/samples`, {
          method: "POST",
          headers: auth,
          body: JSON.stringify({ metadata, ...extra, limit: 50 }),
        });
        if (r.status !== 200 || (JSON.parse(r.body) as unknown[]).length !== 50)
          throw new Error(`page failed: ${r.status}`);
      };
    const count =
      (metadata: Record<string, string>, expected: number, extra: Record<string, string> = {}) =>
      async () => {
        const r = await request(`${app.base}/v1/pipelines/${big.id}/count`, {
          method: "POST",
          headers: auth,
          body: JSON.stringify({ metadata, ...extra }),
        });
        if (r.status !== 200 || (JSON.parse(r.body) as { count: number }).count !== expected) {
          throw new Error(`count failed: ${r.status} ${r.body}`);
        }
      };
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

    console.log(
      JSON.stringify({
        bench: "ingest",
        add_vs_empty_route: round(addRps / emptyRps),
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
      }),
    );
  } finally {
    await handle.close();
    await app.stop();
    await db.drop();
  }
}
