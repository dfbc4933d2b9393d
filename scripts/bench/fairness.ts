// `npm run bench -- fairness [--quick]`: one team floods its deployment while another team uses
// its own, through the production app and one worker (real Postgres, the larger generated model):
//   ttft_flooded_vs_idle    team B's time to first token while team A floods (40 requests with
//                           n: 16, all at once; B sends an 8-token completion every 250 ms) ÷
//                           team B's time to first token on an idle worker (medians; goal ≤ 3)
//   flood_throughput_ratio  team A's aggregate tokens/s in that flood, with team B's requests
//                           running ÷ the same flood alone (goal ≥ 0.9: fairness must not cost
//                           throughput)
// The last line printed is one JSON object with both keys. With --trace, the worker's scheduler
// traces its steps (ENGINE_TRACE) and the bench prints where the engine's time went in each flood.
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { connect } from "@/lib/db/client";
import { resetEnvCache } from "@/lib/env";
import { createApiKey } from "@/lib/services/api-keys";
import { createDeployment } from "@/lib/services/deployments";
import { createTeam, setTeamLimits } from "@/lib/services/teams";
import { cachedTinyModel } from "../tiny-model/generate";
import {
  freshDatabase,
  httpStreamTokens,
  openRequest,
  percentile,
  round,
  startProductionApp,
  startWorkerProcess,
  UNLIMITED,
  stopWorkerProcess,
} from "./_harness";

const AUTH_SECRET = "bench-secret-0123456789-0123456789-abc";
const PROMPT = "Once upon a time there was a small village near a river. The people of the village were";
const now = () => performance.now();

export default async function fairness(args: string[]) {
  const quick = args.includes("--quick");
  const model = await cachedTinyModel({ large: true });
  const db = await freshDatabase("fairness", args);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "lmp-bench-fairness-"));
  Object.assign(process.env, { AUTH_SECRET, DATA_DIR: dataDir });
  const traceFile = args.includes("--trace") ? path.join(dataDir, "engine-trace.ndjson") : null;
  if (traceFile) process.env.ENGINE_TRACE = traceFile;
  resetEnvCache();
  let worker: ChildProcess | undefined;
  let app: Awaited<ReturnType<typeof startProductionApp>> | undefined;
  try {
    const handle = connect(db.url, { max: 1 });
    const teams = [];
    for (const slug of ["team-a", "team-b"]) {
      const team = await createTeam(handle.db, { slug });
      // The flood itself is what is measured: the per-key limits would refuse most of it.
      await setTeamLimits(handle.db, { teamId: team.id, limits: UNLIMITED });
      const key = (await createApiKey(handle.db, { teamId: team.id, kind: "model" })).secret;
      await createDeployment(handle.db, { teamId: team.id, name: "model", model });
      teams.push({ url: "", key, slug });
    }
    await handle.close();
    app = await startProductionApp(db.url);
    worker = await startWorkerProcess(db.url, dataDir, model, AUTH_SECRET);
    delete process.env.ENGINE_TRACE;
    const [a, b] = teams.map((t) => ({ ...t, url: `${app!.base}/deployments/${t.slug}/model` }));

    const floodTokens = quick ? 24 : 64;
    const floodRequests = quick ? 12 : 40;
    const flood = async () => {
      const t = now();
      const counts = await Promise.all(
        Array.from({ length: floodRequests }, (_, i) =>
          httpStreamTokens(a!.url, a!.key, { prompt: PROMPT, max_tokens: floodTokens, n: 16, seed: i, temperature: 1 }),
        ),
      );
      return counts.reduce((x, y) => x + y, 0) / ((now() - t) / 1000);
    };
    const ttft = async () => {
      const start = now();
      const res = await openRequest(b!.url, {
        method: "POST",
        headers: { authorization: `Bearer ${b!.key}`, "content-type": "application/json" },
        body: JSON.stringify({ prompt: "Hello there", max_tokens: 8, temperature: 0, stream: true }),
      });
      if (res.statusCode !== 200) throw new Error(`team B: HTTP ${res.statusCode}`);
      res.setEncoding("utf8");
      let text = "";
      for await (const chunk of res) {
        text += chunk as string;
        if (/"text":"[^"]|"completion":"[^"]/.test(text)) break;
      }
      return now() - start;
    };

    // Warm-up: the worker loads the model (both deployments share it), arenas settle.
    for (let i = 0; i < 3; i++) await ttft();
    await httpStreamTokens(a!.url, a!.key, { prompt: PROMPT, max_tokens: 8, n: 16 });

    const idle: number[] = [];
    const idleFrom = Date.now();
    for (let i = 0; i < (quick ? 7 : 21); i++) idle.push(await ttft());
    const idleTo = Date.now();
    const aloneFrom = Date.now();
    const alone = await flood();
    const aloneTo = Date.now();

    // The flood again, and team B's requests one after another while it runs.
    const flooded: number[] = [];
    let flooding = true;
    const sharedFrom = Date.now();
    const withB = flood().finally(() => (flooding = false));
    await new Promise((r) => setTimeout(r, 300)); // the flood fills the batch and the queue first
    // Team B is an ordinary user: a short completion now and then, not a flood of its own.
    while (flooding) {
      flooded.push(await ttft());
      await new Promise((r) => setTimeout(r, 250));
    }
    const shared = await withB;
    const sharedTo = Date.now();
    if (traceFile) {
      await new Promise((r) => setTimeout(r, 300)); // the worker writes its trace when it idles
      summarizeTrace(traceFile, {
        "team B idle": [idleFrom, idleTo],
        "flood alone": [aloneFrom, aloneTo],
        "flood + team B": [sharedFrom, sharedTo],
      });
    }

    const [idleT, floodedT] = [percentile(idle, 50), percentile(flooded, 50)];
    console.log(
      `team B time to first token: idle ${idleT.toFixed(1)} ms, during team A's flood ${floodedT.toFixed(1)} ms ` +
        `(median of ${flooded.length}; p95 ${percentile(flooded, 95).toFixed(1)} ms)`,
    );
    console.log(`team A flood: ${alone.toFixed(1)} tok/s alone, ${shared.toFixed(1)} tok/s with team B's requests`);
    const ttftRatio = floodedT / idleT;
    const throughputRatio = shared / alone;
    console.log(`ttft flooded / idle: ${ttftRatio.toFixed(2)} (goal ≤ 3)`);
    console.log(`flood throughput shared / alone: ${throughputRatio.toFixed(3)} (goal ≥ 0.9)`);
    console.log(
      JSON.stringify({
        bench: "fairness",
        ttft_flooded_vs_idle: round(ttftRatio, 3),
        flood_throughput_ratio: round(throughputRatio, 3),
      }),
    );
  } finally {
    await stopWorkerProcess(worker);
    await app?.stop();
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

interface TraceLine {
  k: "prefill" | "decode" | "first";
  at: number;
  ms: number;
  rows: number;
  reshapeMs: number;
  moved: number;
  n: number;
  queuedMs: number;
  ttftMs: number;
}

/** Where the worker's engine spent each phase's wall time, from its ENGINE_TRACE lines. */
function summarizeTrace(file: string, phases: Record<string, [number, number]>) {
  if (!existsSync(file)) return console.log("(no engine trace written)");
  const lines = readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as TraceLine);
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  const mean = (xs: number[]) => (xs.length ? sum(xs) / xs.length : 0);
  for (const [name, [from, to]] of Object.entries(phases)) {
    const within = lines.filter((l) => l.at >= from && l.at <= to);
    const decode = within.filter((l) => l.k === "decode");
    const prefill = within.filter((l) => l.k === "prefill");
    const steps = [...decode, ...prefill];
    const wall = to - from;
    const busy = sum(steps.map((l) => l.ms));
    const reshape = sum(steps.map((l) => l.reshapeMs));
    const firstB = within.filter((l) => l.k === "first" && l.n === 1);
    console.log(
      `engine, ${name}: ${wall} ms wall; ${decode.length} decode steps (mean ${mean(decode.map((l) => l.ms)).toFixed(2)} ms, ` +
        `${mean(decode.map((l) => l.rows)).toFixed(1)} rows, ${sum(decode.map((l) => l.rows))} tokens), ` +
        `${prefill.length} prefills (mean ${mean(prefill.map((l) => l.ms)).toFixed(2)} ms); ` +
        `reshape ${reshape.toFixed(0)} ms (${(sum(steps.map((l) => l.moved)) / 2 ** 20).toFixed(0)} MiB copied); ` +
        `outside steps ${(wall - busy - reshape).toFixed(0)} ms` +
        (firstB.length
          ? `; team B in the engine: queued ${percentile(
              firstB.map((l) => l.queuedMs),
              50,
            ).toFixed(1)} ms, first token ${percentile(
              firstB.map((l) => l.ttftMs),
              50,
            ).toFixed(1)} ms after submit (medians of ${firstB.length})`
          : ""),
    );
  }
}
