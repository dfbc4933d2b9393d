// `npm run bench -- serve [--quick]`: the deployment endpoint over HTTP (production app + one
// worker process, real Postgres) against the same engine in this process, on the larger
// generated model. Both figures are ratios measured in the same run:
//   ttft_http_vs_engine  time to the first streamed token through the app (POST stream:true)
//                        / the engine's own time to first token        (goal ≤ 1.2)
//   http8_vs_engine8     aggregate tokens/s of 8 concurrent HTTP streams
//                        / the engine's in-process figure for 8 streams (goal ≥ 0.9)
// The two sides never run at the same time (they share the machine's cores). The last line
// printed is one JSON object with both keys.
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { connect } from "@/lib/db/client";
import { resetEnvCache } from "@/lib/env";
import { InferenceClient } from "@/lib/inference/client";
import { workerSecret } from "@/lib/internal-secret";
import { createApiKey } from "@/lib/services/api-keys";
import { liveWorkers } from "@/lib/services/inference-routing";
import { createDeployment } from "@/lib/services/deployments";
import { createTeam, setTeamLimits } from "@/lib/services/teams";
import { Engine } from "../../workers/engine/engine";
import { cachedTinyModel } from "../tiny-model/generate";
import {
  cpuSeconds,
  freshDatabase,
  httpStreamTokens,
  openRequest,
  percentile,
  startProductionApp,
  startWorkerProcess,
  UNLIMITED,
  stopWorkerProcess,
} from "./_harness";

const PROMPT = "Once upon a time there was a small village near a river. The people of the village were";
const LONG_PROMPT =
  "Good morning, everyone. Today we will talk about the history of the river and the old bridge in our town. " +
  "The bridge was built two hundred years ago with stones from the hills, and it still stands today. " +
  "In the evening the old man sat by the fire and told stories about the sea.";
// The production app of the harness signs with this secret; the worker derives the shared one from it.
const AUTH_SECRET = "bench-secret-0123456789-0123456789-abc";

const now = () => performance.now();
const median = (xs: number[]) => percentile(xs, 50);

export default async function bench(args: string[]) {
  const quick = args.includes("--quick");
  const model = await cachedTinyModel({ large: true });
  const db = await freshDatabase("serve", args);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "lmp-bench-serve-"));
  // This process reads the worker table and talks to the worker as the app does.
  Object.assign(process.env, { AUTH_SECRET, DATA_DIR: dataDir });
  resetEnvCache();
  let worker: ChildProcess | undefined;
  let app: Awaited<ReturnType<typeof startProductionApp>> | undefined;
  try {
    const handle = connect(db.url, { max: 1 });
    const team = await createTeam(handle.db, { slug: "bench" });
    // The bench measures the app's throughput with one key, far past the default per-key limits.
    await setTeamLimits(handle.db, { teamId: team.id, limits: UNLIMITED });
    const key = (await createApiKey(handle.db, { teamId: team.id, kind: "model" })).secret;
    await createDeployment(handle.db, { teamId: team.id, name: "large", model });
    await handle.close();

    // The engine alone, in this process (default options, like the worker's, but no prompt cache:
    // the bench repeats its prompts), and the same model behind the production app and a worker
    // process (startWorkerProcess turns its cache off too).
    const engine = new Engine({ models: [model], promptCacheBytes: 0 });
    const m = await engine.load();
    app = await startProductionApp(db.url);
    worker = await startWorkerProcess(db.url, dataDir, model, AUTH_SECRET);
    const url = `${app.base}/deployments/bench/large`;
    const registry = connect(db.url, { max: 1 });
    const [w] = await liveWorkers(registry.db);
    await registry.close();
    const direct = new InferenceClient({ url: w!.address, secret: workerSecret() });

    const noEos = Object.fromEntries(m.info.eosTokenIds.map((id) => [String(id), -100]));
    const tokens = quick ? 48 : 128;
    const streamReq = (seed: number) => ({
      prompt: PROMPT,
      max_tokens: tokens,
      seed,
      temperature: 0.8,
      logit_bias: noEos,
    });
    const ttftReq = { prompt: LONG_PROMPT, max_tokens: 1, temperature: 0 };
    const runs = quick ? 5 : 13;
    const rounds = quick ? 2 : 5;

    const engineTtft = async () => {
      const start = now();
      for await (const e of await engine.start(ttftReq)) if (e.type === "delta" && e.text) break;
      return now() - start;
    };
    // Where the time goes: the worker's internal API alone (no app, no auth, no routing).
    const directTtft = async () => {
      const start = now();
      for await (const e of await direct.open({ model, ...ttftReq })) if (e.type === "delta" && e.text) break;
      return now() - start;
    };
    const httpTtft = async () => {
      const start = now();
      const res = await openRequest(url, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ ...ttftReq, stream: true }),
      });
      if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}`);
      res.setEncoding("utf8");
      let text = "";
      for await (const chunk of res) {
        text += chunk as string;
        if (/"completion":"[^"]/.test(text)) break; // leaving the loop closes the response
      }
      if (!/"completion":"[^"]/.test(text)) throw new Error("stream ended before the first token");
      return now() - start;
    };
    // CPU time of the app and of the worker process per streamed token (where the HTTP path's
    // cost goes: the worker's serving code and the app's relaying both take cores from ONNX Runtime).
    const cpu = { app: 0, worker: 0, tokens: 0, engine: 0, engineTokens: 0 };
    const engine8 = async () => {
      const cpu0 = process.cpuUsage();
      const t = now();
      const all = await Promise.all(Array.from({ length: 8 }, (_, i) => engine.generate(streamReq(i + 1))));
      const tokens = all.reduce((a, r) => a + r.usage.completion_tokens, 0);
      const used = process.cpuUsage(cpu0);
      cpu.engine += (used.user + used.system) / 1e6;
      cpu.engineTokens += tokens;
      return tokens / ((now() - t) / 1000);
    };
    const http8 = async () => {
      const [app0, worker0] = [cpuSeconds(app!.pid), cpuSeconds(worker!.pid!)];
      const t = now();
      const counts = await Promise.all(
        Array.from({ length: 8 }, (_, i) => httpStreamTokens(url, key, streamReq(i + 1))),
      );
      const tokens = counts.reduce((a, b) => a + b, 0);
      cpu.app += cpuSeconds(app!.pid) - app0;
      cpu.worker += cpuSeconds(worker!.pid!) - worker0;
      cpu.tokens += tokens;
      return tokens / ((now() - t) / 1000);
    };
    // Warm-up: ONNX Runtime arenas here, model loading in the worker.
    for (let i = 0; i < 3; i++) await Promise.all([engineTtft(), httpTtft()]);
    await engine8();
    await http8();

    // Time to first token: the three sides take turns request by request, so a burst of load
    // from elsewhere on this shared machine hits them alike; the medians over every round count.
    // Throughput: the sides alternate round by round and the best round of each counts.
    const ttft = { engine: [] as number[], direct: [] as number[], http: [] as number[] };
    let engineRate = 0;
    let httpRate = 0;
    for (let round = 0; round < rounds; round++) {
      for (let i = 0; i < runs; i++) {
        ttft.engine.push(await engineTtft());
        ttft.direct.push(await directTtft());
        ttft.http.push(await httpTtft());
      }
      engineRate = Math.max(engineRate, await engine8());
      httpRate = Math.max(httpRate, await http8());
    }
    const [engineT, directT, httpT] = [median(ttft.engine), median(ttft.direct), median(ttft.http)];
    console.log(
      `time to first token: engine ${engineT.toFixed(1)} ms, worker API ${directT.toFixed(1)} ms, app ${httpT.toFixed(1)} ms`,
    );
    console.log(`8 concurrent streams: engine ${engineRate.toFixed(1)} tok/s, app ${httpRate.toFixed(1)} tok/s`);
    console.log(
      `CPU per token (8 streams): engine in-process ${((cpu.engine * 1000) / cpu.engineTokens).toFixed(3)} ms; ` +
        `over HTTP: worker ${((cpu.worker * 1000) / cpu.tokens).toFixed(3)} ms + app ${((cpu.app * 1000) / cpu.tokens).toFixed(3)} ms`,
    );

    const ttftRatio = httpT / engineT;
    const rateRatio = httpRate / engineRate;
    console.log(`ttft http / engine: ${ttftRatio.toFixed(3)} (goal ≤ 1.2)`);
    console.log(`8-stream tokens/s http / engine: ${rateRatio.toFixed(3)} (goal ≥ 0.9)`);
    const round = (x: number) => Math.round(x * 1000) / 1000;
    console.log(
      JSON.stringify({ bench: "serve", ttft_http_vs_engine: round(ttftRatio), http8_vs_engine8: round(rateRatio) }),
    );
  } finally {
    await stopWorkerProcess(worker);
    await app?.stop();
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
