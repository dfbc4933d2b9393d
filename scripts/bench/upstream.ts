// `npm run bench -- upstream [--quick] [--tokens N] [--upstream-ttft-ms N] [--embedded]`: an upstream
// deployment (production app, real Postgres, no worker) in front of a local OpenAI-compatible
// server that streams as fast as it can (one token per SSE event, a turn of the event loop between
// them), against the same server called straight. Figures, measured in the same run:
//   ttft_vs_direct        median time to the first token through the app (deployment POST
//                         stream:true) / straight to the upstream's /v1/completions  (goal ≤ 1.1)
//   ttft_added_ms         the difference of the two medians                          (goal < 5 ms)
//   throughput_vs_direct  tokens/s of 32 concurrent streams through the app / straight (goal ≥ 0.95)
//   ttft_vs_direct_at_20ms the same ratio against a second upstream that waits 20 ms before its
//                         first token (a GPU server's prefill; `--realistic-ttft-ms N` to change)
// `--tokens N` sets the tokens of each throughput stream (default 256): short answers weigh the
// app's cost per request, long ones its cost per token (both are printed). The throughput phase
// alternates the two sides in `--rounds N` rounds of 2 s (default 8; 2 of 1.5 s with --quick): on
// this shared host one round of a side ranged over ±15%, so the figure takes 16 s of each.
// BENCH_UPSTREAM_TTFT_ONLY=1 stops after the time-to-first-token phases (to profile those alone,
// with BENCH_APP_NODE_ARGS="--cpu-prof …").
// `--via completions|chat` goes through OpenAI's paths instead of the deployment endpoint
// (POST /v1/completions with the prompt, or /v1/chat/completions with it as a user message, both
// with an API key and `stream: true`); the upstream answers both alike.
// `--upstream-ttft-ms` makes the main upstream wait that long before its first token too; by
// default it answers at once, which makes the ratio the hardest it can be. The CPU time each
// process spent per token in the throughput phases is printed too (the machine has few cores:
// the load generator, the app and the upstream share them).
import { spawn } from "node:child_process";
import type { IncomingMessage } from "node:http";
import { connect } from "@/lib/db/client";
import { createApiKey } from "@/lib/services/api-keys";
import { createDeployment } from "@/lib/services/deployments";
import { createTeam, setTeamLimits } from "@/lib/services/teams";
import {
  cpuSeconds,
  freshDatabase,
  openRequest,
  percentile,
  round,
  startProductionApp,
  syscalls,
  UNLIMITED,
} from "./_harness";

const arg = (args: string[], name: string, fallback: number) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};

/**
 * The fast upstream, in a process of its own (so that it does not share the load generator's
 * thread): /v1/completions streamed, `max_tokens` tokens, then the usage and [DONE].
 */
const UPSTREAM_SOURCE = `
const http = require("node:http");
const ttftMs = Number(process.argv[1] || 0);
const server = http.createServer((req, res) => {
  let raw = "";
  req.on("data", (c) => (raw += c));
  req.on("end", async () => {
    const body = JSON.parse(raw);
    const n = body.max_tokens || 16;
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    if (ttftMs > 0) await new Promise((r) => setTimeout(r, ttftMs));
    for (let i = 0; i < n && !res.destroyed; i++) {
      const finish = i === n - 1 ? '"length"' : "null";
      res.write('data: {"id":"cmpl-b","object":"text_completion","model":"' + body.model +
        '","choices":[{"index":0,"text":" tok' + i + '","logprobs":null,"finish_reason":' + finish + '}]}\\n\\n');
      await new Promise((r) => setImmediate(r));
    }
    res.write('data: {"id":"cmpl-b","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":' + n +
      ',"total_tokens":' + (n + 8) + '}}\\n\\n');
    res.end("data: [DONE]\\n\\n");
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
`;

async function fastUpstream(ttftMs: number): Promise<{ url: string; pid: number; close: () => Promise<void> }> {
  const child = spawn(process.execPath, ["-e", UPSTREAM_SOURCE, String(ttftMs)], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const port = await new Promise<string>((resolve, reject) => {
    child.stdout!.once("data", (d: Buffer) => resolve(d.toString().trim()));
    child.once("exit", (code) => reject(new Error(`the fast upstream exited (${code})`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    close: () =>
      new Promise((r) => {
        child.once("exit", () => r());
        child.kill("SIGTERM");
      }),
  };
}

/** One streamed request: ms to the first event with text, and the text events it carried. */
async function stream(url: string, headers: Record<string, string>, body: unknown) {
  const started = performance.now();
  const res: IncomingMessage = await openRequest(url, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode} from ${url}`);
  let ttft = -1;
  let tokens = 0;
  let reads = 0;
  let tail = "";
  for await (const chunk of res) {
    reads++;
    const text = tail + (chunk as Buffer).toString();
    const parts = text.split("\n\n");
    tail = parts.pop()!;
    for (const p of parts) {
      // The upstream's tokens are " tok<i>": the platform's chunks may carry several at once.
      const n = p.match(/ tok\d+/g)?.length ?? 0;
      if (n > 0 && ttft < 0) ttft = performance.now() - started;
      tokens += n;
    }
  }
  return { ttft, tokens, reads };
}

export default async function bench(args: string[]) {
  const quick = args.includes("--quick");
  const via = args.includes("--via") ? args[args.indexOf("--via") + 1] : "deployment";
  if (!["deployment", "completions", "chat"].includes(via ?? ""))
    throw new Error(`--via takes deployment, completions or chat, not ${via}`);
  const upstreamTtftMs = arg(args, "--upstream-ttft-ms", 0);
  const realisticTtftMs = arg(args, "--realistic-ttft-ms", 20);
  const upstream = await fastUpstream(upstreamTtftMs);
  const slowUpstream = await fastUpstream(realisticTtftMs);
  const db = await freshDatabase("upstream", args);
  let app: Awaited<ReturnType<typeof startProductionApp>> | undefined;
  try {
    const handle = connect(db.url, { max: 1 });
    const team = await createTeam(handle.db, { slug: "bench" });
    await setTeamLimits(handle.db, { teamId: team.id, limits: UNLIMITED });
    const key = (await createApiKey(handle.db, { teamId: team.id, kind: "model" })).secret;
    const apiKey = (await createApiKey(handle.db, { teamId: team.id, kind: "api" })).secret;
    await createDeployment(handle.db, {
      teamId: team.id,
      name: "up",
      upstream: { kind: "vllm", urls: [upstream.url], model: "fast" },
    });
    await createDeployment(handle.db, {
      teamId: team.id,
      name: "prefill",
      upstream: { kind: "vllm", urls: [slowUpstream.url], model: "fast" },
    });
    await handle.close();
    app = await startProductionApp(db.url);

    const viaApp = ({ prompt, ...body }: Record<string, unknown>, name = "up") =>
      via === "deployment"
        ? stream(
            `${app!.base}/deployments/bench/${name}`,
            { authorization: `Bearer ${key}` },
            { prompt, ...body, stream: true },
          )
        : stream(
            `${app!.base}/v1/${via === "chat" ? "chat/completions" : "completions"}`,
            { authorization: `Bearer ${apiKey}` },
            {
              model: `bench/${name}`,
              ...(via === "chat" ? { messages: [{ role: "user", content: prompt }] } : { prompt }),
              ...body,
              stream: true,
            },
          );
    const direct = (body: Record<string, unknown>, url = upstream.url) =>
      stream(`${url}/v1/completions`, {}, { model: "fast", ...body, stream: true });

    // Warm-up: the app's routes, caches and connections.
    for (let i = 0; i < 30; i++) {
      await viaApp({ prompt: "warm", max_tokens: 4 });
      await direct({ prompt: "warm", max_tokens: 4 });
    }

    // Time to first token, one request at a time, the two sides interleaved.
    const rounds = quick ? 60 : 300;
    const ttApp: number[] = [];
    const ttDirect: number[] = [];
    for (let i = 0; i < rounds; i++) {
      ttDirect.push((await direct({ prompt: "Hello", max_tokens: 8 })).ttft);
      ttApp.push((await viaApp({ prompt: "Hello", max_tokens: 8 })).ttft);
    }
    const medApp = percentile(ttApp, 50);
    const medDirect = percentile(ttDirect, 50);
    console.log(
      `ttft median: direct ${medDirect.toFixed(2)} ms, through the app ${medApp.toFixed(2)} ms ` +
        `(p90 ${percentile(ttDirect, 90).toFixed(2)} / ${percentile(ttApp, 90).toFixed(2)} ms), upstream ttft ${upstreamTtftMs} ms`,
    );

    // The same at a realistic prefill (the second upstream), fewer rounds: each takes 2 × its wait.
    const slowRounds = quick ? 20 : 60;
    const slowApp: number[] = [];
    const slowDirect: number[] = [];
    for (let i = 0; i < slowRounds; i++) {
      slowDirect.push((await direct({ prompt: "Hello", max_tokens: 8 }, slowUpstream.url)).ttft);
      slowApp.push((await viaApp({ prompt: "Hello", max_tokens: 8 }, "prefill")).ttft);
    }
    const medSlowApp = percentile(slowApp, 50);
    const medSlowDirect = percentile(slowDirect, 50);
    console.log(
      `ttft median at ${realisticTtftMs} ms upstream prefill: direct ${medSlowDirect.toFixed(2)} ms, ` +
        `through the app ${medSlowApp.toFixed(2)} ms`,
    );

    if (process.env.BENCH_UPSTREAM_TTFT_ONLY) return;
    // Throughput: 32 concurrent streams for a while, each side on its own, in rounds that
    // alternate the sides (direct, app, app, direct, …): a slow spell of this shared host then
    // falls on both sides alike instead of on whichever ran during it. Each side's rate is its
    // tokens over its time, all rounds together.
    const streams = 32;
    const tokensPer = arg(args, "--tokens", quick ? 64 : 256);
    const sideRounds = arg(args, "--rounds", quick ? 2 : 8);
    const seconds = quick ? 3 : 2 * sideRounds;
    /** One side's totals over its rounds (CPU in seconds; the app's socket reads and writes). */
    const side = (label: string, call: (body: Record<string, unknown>) => ReturnType<typeof stream>) => ({
      label,
      call,
      tokens: 0,
      reads: 0,
      requests: 0,
      elapsed: 0,
      cpu: { app: 0, upstream: 0, self: 0 },
      appIo: { reads: 0, writes: 0 },
      rates: [] as number[],
    });
    const directSide = side("direct", (b) => direct(b));
    const appSide = side("through the app", (b) => viaApp(b));
    const runRound = async (s: typeof directSide) => {
      const start = performance.now();
      const deadline = start + (seconds * 1000) / sideRounds;
      const cpu0 = { app: cpuSeconds(app!.pid), upstream: cpuSeconds(upstream.pid), self: process.cpuUsage() };
      const io0 = syscalls(app!.pid);
      let tokens = 0;
      await Promise.all(
        Array.from({ length: streams }, async () => {
          while (performance.now() < deadline) {
            const r = await s.call({ prompt: "Go", max_tokens: tokensPer });
            tokens += r.tokens;
            s.reads += r.reads;
            s.requests++;
          }
        }),
      );
      const elapsed = (performance.now() - start) / 1000;
      const self = process.cpuUsage(cpu0.self);
      const io = syscalls(app!.pid);
      s.tokens += tokens;
      s.elapsed += elapsed;
      s.rates.push(tokens / elapsed);
      s.cpu.app += cpuSeconds(app!.pid) - cpu0.app;
      s.cpu.upstream += cpuSeconds(upstream.pid) - cpu0.upstream;
      s.cpu.self += (self.user + self.system) / 1e6;
      s.appIo.reads += io.reads - io0.reads;
      s.appIo.writes += io.writes - io0.writes;
    };
    console.log(
      `32 streams of ${tokensPer} tokens, ${seconds} s each side in ${sideRounds} alternating rounds, through ${via}:`,
    );
    // One round of each side first, not counted: V8 optimizes the relay's code only once it is hot
    // (the time-to-first-token phases above do not make it so), and the first rounds through the
    // app ran 10-20% slower than the later ones while it did.
    for (const s of [side("warm-up", directSide.call), side("warm-up", appSide.call)]) await runRound(s);
    for (let i = 0; i < sideRounds; i++) {
      for (const s of i % 2 === 0 ? [directSide, appSide] : [appSide, directSide]) await runRound(s);
    }
    for (const s of [directSide, appSide]) {
      const perToken = (cpu: number) => ((cpu * 1e6) / s.tokens).toFixed(1);
      const perRequest = (n: number) => (n / s.requests).toFixed(1);
      console.log(
        `  ${s.label}: ${Math.round(s.tokens / s.elapsed)} tokens/s (rounds: ${s.rates.map(Math.round).join(", ")}), ` +
          `${Math.round(s.requests / s.elapsed)} requests/s; CPU µs per token: app ${perToken(s.cpu.app)}, ` +
          `upstream ${perToken(s.cpu.upstream)}, load generator ${perToken(s.cpu.self)}; app CPU ms per request ` +
          `${((s.cpu.app * 1e3) / s.requests).toFixed(3)}; ${(s.tokens / s.reads).toFixed(2)} tokens per read; ` +
          `app system calls per request: ${perRequest(s.appIo.reads)} reads, ${perRequest(s.appIo.writes)} writes`,
      );
    }
    const directRate = directSide.tokens / directSide.elapsed;
    const appRate = appSide.tokens / appSide.elapsed;

    console.log(
      JSON.stringify({
        bench: "upstream",
        ttft_vs_direct: round(medApp / medDirect),
        ttft_added_ms: round(medApp - medDirect),
        [`ttft_vs_direct_at_${realisticTtftMs}ms`]: round(medSlowApp / medSlowDirect),
        [`ttft_added_ms_at_${realisticTtftMs}ms`]: round(medSlowApp - medSlowDirect),
        throughput_vs_direct: round(appRate / directRate),
      }),
    );
  } finally {
    await app?.stop();
    await upstream.close();
    await slowUpstream.close();
    await db.drop();
  }
}
