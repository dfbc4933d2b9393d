// `npm run bench -- llamacpp [--size bench|tiny] [--threads 2] [--dtypes=fp32,q4] [--no-wait]
//                            [--quiet-max 600] [--tokens 128] [--runs 3] [--no-batch] [--no-profile]`
// Decode speed of our engine against llama.cpp (the CPU engine Ollama runs) on identical weights.
// Not part of `npm test`: it needs g++ and a few minutes (see docs/api.md, "Decode speed against llama.cpp").
//
// 1. The generated llama (scripts/tiny-model, size "bench": 134.1M parameters, hidden 768, 12 layers,
//    vocabulary 32,000) in the standard export layout: onnx/model.onnx (fp32), model_fp16.onnx,
//    model_quantized.onnx (q8: MatMulInteger, per-tensor) and model_q4.onnx (MatMulNBits, block 32,
//    accuracy_level 4): the files users' exports are, run as the engine runs them.
// 2. The same weights (same seed, same makeLlamaWeights call) as GGUF F32, F16, Q8_0 and Q4_0
//    (llamacpp/gguf.ts), read back by an independent GGUF reader to check the metadata.
// 3. llama.cpp's tools, offline: node-llama-cpp installed from the npm registry into
//    node_modules/.cache/lmp-llamacpp, llama-bench and llama-batched-bench compiled from the llama.cpp
//    source it ships (llamacpp/tools.ts, llamacpp/build.sh).
// 4. Parity: greedy tokens of our engine (fp32) and llama.cpp (F32) from the same prompt ids must be
//    equal (48 tokens); the bench fails otherwise.
// 5. Figures, each measured after waiting for a quiet machine (other processes under 10% of a core
//    for 6 s; --no-wait skips), with the same thread count for both engines (--threads, default 2):
//      <dtype>_decode_vs_llamacpp  single-stream greedy decode tokens/s: ours (engine API, 128 tokens
//                                  after a short prompt, median of 3) / llama-bench -p 0 -n 128 -r 3
//      prefill_vs_llamacpp         512-token prompt, tokens/s: ours (engine, max_tokens 1) /
//                                  llama-bench -p 512 -n 0 (fp32; other dtypes as <dtype>_prefill_…)
//      batch8_vs_llamacpp          aggregate decode tokens/s of 8 concurrent streams (fp32): ours /
//                                  llama-batched-bench -npl 8 (S_TG)
//      fp32_weights_gb_per_s       fp32 weight bytes read per token × our fp32 decode tokens/s
//    and the profile of our decode step (fp32 and q4): step_ms (period between two decode passes),
//    ort_ms (session.run), js_ms (the rest: sampling, cache bookkeeping, scheduling), the kernel
//    breakdown from onnxruntime's own profiler, and the bare pass under other thread settings.
// The last line is one JSON object: the issue's figures, then raw tokens/s and the profile.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import * as ort from "onnxruntime-node";
import { Engine } from "../../workers/engine/engine";
import type { LoadedModel } from "../../workers/engine/model/load-model";
import {
  int64Tensor,
  kvTensor,
  newKvArray,
  sessionOptions,
  type GraphSession,
  type OrtTensor,
} from "../../workers/engine/model/session";
import type { WeightFormat } from "../tiny-model/graph-parts";
import { cachedTinyModel } from "../tiny-model/generate";
import { makeLlamaWeights, type LlamaShape } from "../tiny-model/llama-weights";
import { createRng } from "../tiny-model/prng";
import { GGUF_KINDS, writeGgufFiles, type GgufKind } from "./llamacpp/gguf";
import { ensureTools, type LlamaCppTools } from "./llamacpp/tools";

const now = () => performance.now();
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (s: string) => console.log(s);

const DTYPES: WeightFormat[] = ["fp32", "fp16", "q8", "q4"];
const KIND: Record<string, GgufKind> = { fp32: "f32", fp16: "f16", q8: "q8_0", q4: "q4_0" };
const PROMPT = "Once upon a time there was a small village near a river. The people of the village were";
const PARITY_TOKENS = 48;
const PREFILL_TOKENS = 512;

interface Options {
  size: "bench" | "tiny";
  threads: number;
  wait: boolean;
  quietMaxS: number;
  tokens: number;
  runs: number;
  dtypes: WeightFormat[];
  batch: boolean;
  profile: boolean;
}

function parseArgs(args: string[]): Options {
  const value = (name: string): string | undefined => {
    const eq = args.find((a) => a.startsWith(`${name}=`));
    if (eq) return eq.slice(name.length + 1);
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const num = (name: string, d: number) => {
    const v = value(name);
    if (v === undefined) return d;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new Error(`${name} wants a positive integer, got ${v}`);
    return n;
  };
  const size = value("--size") ?? "bench";
  if (size !== "bench" && size !== "tiny") throw new Error(`--size is bench or tiny, got ${size}`);
  const only = value("--dtypes")?.split(",");
  const dtypes = DTYPES.filter((d) => !only || only.includes(d));
  if (dtypes.length === 0) throw new Error(`--dtypes: choose among ${DTYPES.join(",")}`);
  return {
    size,
    threads: num("--threads", 2),
    wait: !args.includes("--no-wait"),
    quietMaxS: num("--quiet-max", 600),
    tokens: num("--tokens", 128),
    runs: num("--runs", 3),
    dtypes,
    batch: !args.includes("--no-batch"),
    profile: !args.includes("--no-profile"),
  };
}

// ---- machine load ----

/** Busy jiffies of the whole machine, and those of this process and its waited-for children. */
function cpuTicks() {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  const self = readFileSync("/proc/self/stat", "utf8");
  const s = self
    .slice(self.lastIndexOf(")") + 2)
    .split(" ")
    .map(Number);
  // fields 14-17 of /proc/self/stat (utime, stime, cutime, cstime) are s[11..14] after the name
  return { busy: f[0] + f[1] + f[2] + f[5] + f[6] + f[7], own: s[11] + s[12] + s[13] + s[14], t: now() };
}

/** CPU other processes used during a window, in % of one core (USER_HZ = 100). */
function foreignPct(a: ReturnType<typeof cpuTicks>, b: ReturnType<typeof cpuTicks>): number {
  const seconds = (b.t - a.t) / 1000;
  return Math.max(0, Math.round((b.busy - a.busy - (b.own - a.own)) / seconds));
}

const loadavg = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

/**
 * Waits until other processes use under 10% of a core for 3 consecutive 2 s windows (as the
 * llama.cpp anchor's wait-quiet.sh): a concurrent process wrecks 2-thread figures on 2 cores.
 */
async function waitQuiet(o: Options): Promise<void> {
  if (!o.wait) return;
  const start = now();
  let ok = 0;
  let pct = 0;
  while (ok < 3) {
    const a = cpuTicks();
    await sleep(2000);
    pct = foreignPct(a, cpuTicks());
    ok = pct < 10 ? ok + 1 : 0;
    if (now() - start > o.quietMaxS * 1000) {
      log(`  (machine still busy after ${o.quietMaxS} s: ${pct}% of a core used by others; measuring anyway)`);
      return;
    }
  }
  if (now() - start > 7000) log(`  (waited ${((now() - start) / 1000).toFixed(0)} s for a quiet machine)`);
}

// ---- the model in both formats ----

interface ModelFiles {
  dir: string;
  shape: LlamaShape;
  eosId: number;
  gguf: Record<GgufKind, string>;
  /** fp32 weight bytes read per decoded token (every matrix but the embedding, of which one row is read). */
  fp32BytesPerToken: number;
}

async function prepareModel(o: Options): Promise<ModelFiles> {
  let t = now();
  const dir = await cachedTinyModel({ family: "llama", size: o.size, dtypes: DTYPES, q4Accuracy: 4 });
  log(`model ${dir} ready in ${((now() - t) / 1000).toFixed(1)} s`);
  const cfg = JSON.parse(readFileSync(path.join(dir, "config.json"), "utf8"));
  const shape: LlamaShape = {
    vocabSize: cfg.vocab_size,
    hidden: cfg.hidden_size,
    layers: cfg.num_hidden_layers,
    heads: cfg.num_attention_heads,
    kvHeads: cfg.num_key_value_heads,
    ffn: cfg.intermediate_size,
    maxPositions: cfg.max_position_embeddings,
    ropeTheta: cfg.rope_theta,
    rmsEps: cfg.rms_norm_eps,
  };
  const eosId = cfg.eos_token_id as number;
  const ggufDir = path.join(os.tmpdir(), "lmp-llamacpp-gguf-v1", path.basename(dir));
  const gguf = Object.fromEntries(GGUF_KINDS.map((k) => [k, path.join(ggufDir, `model-${k}.gguf`)])) as Record<
    GgufKind,
    string
  >;
  const missing = GGUF_KINDS.filter((k) => !existsSync(gguf[k]));
  if (missing.length) {
    t = now();
    // generate.ts: rng = createRng(seed), then makeLlamaWeights(shape, rng, bench ? "bench" : "mixing").
    const gen = cfg._generator as { seed: number; size: string };
    const weights = makeLlamaWeights(shape, createRng(gen.seed), gen.size === "bench" ? "bench" : "mixing");
    writeGgufFiles(ggufDir, shape, weights, eosId, missing);
    log(`GGUF ${missing.join(", ")} written to ${ggufDir} in ${((now() - t) / 1000).toFixed(1)} s`);
  }
  const { hidden: C, heads: H, kvHeads: KVH, ffn: F, layers: L, vocabSize: V } = shape;
  const D = C / H;
  const perLayer = C * H * D + 2 * C * KVH * D + H * D * C + 3 * C * F + 2 * C;
  return { dir, shape, eosId, gguf, fp32BytesPerToken: 4 * (L * perLayer + C + C * V) };
}

function helperJson<T>(tools: LlamaCppTools, args: string[]): T {
  const out = execFileSync(process.execPath, [tools.helper, ...args], {
    cwd: tools.dir,
    encoding: "utf8",
    maxBuffer: 64 * 2 ** 20,
    env: { ...process.env, NODE_LLAMA_CPP_SKIP_DOWNLOAD: "true" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  return JSON.parse(out.trim().split("\n").at(-1)!) as T;
}

/** The F32 GGUF read back by @huggingface/gguf: the metadata llama.cpp will use must be our config's. */
function checkGguf(tools: LlamaCppTools, m: ModelFiles) {
  const { meta, tensors } = helperJson<{
    meta: Record<string, unknown>;
    tensors: { name: string; shape: number[]; dtype: number }[];
  }>(tools, ["meta", m.gguf.f32]);
  const s = m.shape;
  const want: Record<string, unknown> = {
    "general.architecture": "llama",
    "llama.context_length": s.maxPositions,
    "llama.embedding_length": s.hidden,
    "llama.block_count": s.layers,
    "llama.feed_forward_length": s.ffn,
    "llama.attention.head_count": s.heads,
    "llama.attention.head_count_kv": s.kvHeads,
    "llama.rope.dimension_count": s.hidden / s.heads,
    "llama.rope.freq_base": s.ropeTheta,
    "tokenizer.ggml.eos_token_id": m.eosId,
  };
  const bad = Object.entries(want).filter(([k, v]) => meta[k] !== v);
  const eps = meta["llama.attention.layer_norm_rms_epsilon"] as number;
  if (Math.abs(eps - s.rmsEps) > 1e-9) bad.push(["rms eps", eps]);
  if ((meta["tokenizer.ggml.tokens"] as { length: number })?.length !== s.vocabSize) bad.push(["vocab", s.vocabSize]);
  const output = tensors.find((t) => t.name === "output.weight");
  if (!output || output.shape.join() !== [s.hidden, s.vocabSize].join()) bad.push(["output.weight", output?.shape]);
  if (tensors.length !== 3 + 9 * s.layers) bad.push(["tensor count", tensors.length]);
  if (bad.length) throw new Error(`GGUF metadata differs from config.json: ${JSON.stringify(bad)}`);
  log(
    `GGUF checked: ${tensors.length} tensors, rope theta ${s.ropeTheta}, rms eps ${eps.toExponential(0)}, ` +
      `context ${s.maxPositions}, untied output.weight [${output!.shape.join(", ")}]`,
  );
}

// ---- our engine ----

function engineFor(m: ModelFiles, dtype: WeightFormat, o: Options) {
  // No prompt cache: the decode rates subtract a run of the same prompts (it would answer their prefills).
  return new Engine({
    models: [m.dir],
    loadOptions: () => ({ dtype, session: { threads: o.threads } }),
    promptCacheBytes: 0,
  });
}

/** Greedy tokens of our engine (fp32) and llama.cpp (F32) from the same ids; throws unless equal. */
async function parity(tools: LlamaCppTools, m: ModelFiles, o: Options) {
  const engine = engineFor(m, "fp32", o);
  const lm = await engine.load();
  const ids = lm.tokenizer.encode(PROMPT);
  const res = await engine.generate({ prompt: ids, max_tokens: PARITY_TOKENS, temperature: 0, logprobs: 5 });
  await engine.dispose();
  const steps = res.choices[0].logprobs ?? [];
  const ours = steps.map((s) => s.token_id);
  const theirs = helperJson<{ tokens: number[]; top: { id: number; p: number }[]; release: { release: string } }>(
    tools,
    ["greedy", m.gguf.f32, "1", ids.join(","), String(PARITY_TOKENS)],
  );
  let agree = 0;
  while (agree < ours.length && ours[agree] === theirs.tokens[agree]) agree++;
  // Our engine stops at EOS (not reported as a token); llama.cpp decodes past it.
  const stoppedAtEos = res.choices[0].finish_reason === "stop" && theirs.tokens[ours.length] === m.eosId;
  const equal = agree === ours.length && (ours.length === PARITY_TOKENS || stoppedAtEos);
  // First step: our top-5 against llama.cpp's (bench-style weights give nearly flat
  // distributions, p ≈ 1/vocab, and a short greedy loop: the ranking and the probabilities
  // themselves say more than the token stream).
  const first = steps[0]?.top_logprobs ?? [];
  let probDiff = 0;
  for (const t of first) {
    const p = theirs.top.find((x) => x.id === t.token_id)?.p ?? 0;
    probDiff = Math.max(probDiff, Math.abs(Math.exp(t.logprob) - p) / Math.exp(t.logprob));
  }
  const sameTop = first.every((t, i) => theirs.top[i]?.id === t.token_id);
  log(
    `parity (fp32 vs llama.cpp ${theirs.release?.release} F32, ${ids.length} prompt ids): ${agree}/${ours.length} greedy tokens equal` +
      `${stoppedAtEos ? " (then EOS in both)" : ""}; first step: top-5 ids ${sameTop ? "equal" : "DIFFER"}, ` +
      `probabilities within ${(probDiff * 100).toFixed(3)}% (top-1 p ${Math.exp(first[0]?.logprob ?? NaN).toExponential(2)})`,
  );
  log(`  ours:      ${ours.slice(0, 16).join(" ")} …`);
  log(`  llama.cpp: ${theirs.tokens.slice(0, 16).join(" ")} …`);
  if (!equal || ours.length < 32 || !sameTop)
    throw new Error(
      `parity failed: the engines disagree at token ${agree} of ${ours.length}: ours ${ours.join(" ")} / llama.cpp ${theirs.tokens.join(" ")}`,
    );
  return { tokens: agree, probDiff };
}

/** Tokens/s of decoding alone: (time(n) - time(1)) over the extra tokens, for `streams` concurrent requests. */
async function decodeRate(engine: Engine, m: LoadedModel, n: number, streams: number): Promise<number> {
  const noEos = Object.fromEntries(m.info.eosTokenIds.map((id) => [String(id), -100]));
  const run = async (max: number) => {
    const rs = await Promise.all(
      Array.from({ length: streams }, (_, i) =>
        engine.generate({
          prompt: `${PROMPT}${" again".repeat(i)}`,
          max_tokens: max,
          temperature: 0,
          logit_bias: noEos,
        }),
      ),
    );
    return rs.reduce((a, r) => a + r.usage.completion_tokens, 0);
  };
  let t = now();
  const one = await run(1);
  const tOne = now() - t;
  t = now();
  const many = await run(n);
  return (many - one) / ((now() - t - tOne) / 1000);
}

/** Instruments session.run; returns the decode passes' timings of one greedy generation. */
async function profileSteps(engine: Engine, m: LoadedModel, n: number) {
  const session = m.session as GraphSession;
  const original = session.run;
  const runs: { start: number; end: number; decode: boolean }[] = [];
  session.run = async (feeds, fetches) => {
    const start = now();
    try {
      return await original.call(session, feeds, fetches);
    } finally {
      runs.push({ start, end: now(), decode: feeds.input_ids.dims[1] === 1 });
    }
  };
  try {
    const noEos = Object.fromEntries(m.info.eosTokenIds.map((id) => [String(id), -100]));
    await engine.generate({ prompt: PROMPT, max_tokens: n, temperature: 0, logit_bias: noEos });
  } finally {
    session.run = original;
  }
  const dec = runs.filter((r) => r.decode);
  const periods = dec.slice(1).map((r, i) => r.start - dec[i].start);
  const ort = dec.map((r) => r.end - r.start);
  const stepMs = periods.reduce((a, b) => a + b, 0) / periods.length;
  const ortMs = ort.reduce((a, b) => a + b, 0) / ort.length;
  return { stepMs, ortMs, jsMs: stepMs - ortMs };
}

/** Feeds of one bare decode pass (1 row, `past` columns of zero cache), as the padded layout sends them. */
function bareFeeds(m: LoadedModel, past: number): Record<string, OrtTensor> {
  const { kv } = m.info.graph;
  const feeds: Record<string, OrtTensor> = {
    input_ids: int64Tensor([5], [1, 1]),
    attention_mask: int64Tensor(new Array(past + 1).fill(1), [1, past + 1]),
  };
  if (m.info.graph.positionIds) feeds.position_ids = int64Tensor([past], [1, 1]);
  for (const e of kv.entries)
    feeds[e.past] = kvTensor(kv.type, newKvArray(kv.type, kv.heads * past * kv.headDim), [
      1,
      kv.heads,
      past,
      kv.headDim,
    ]);
  return feeds;
}

async function timeRuns(session: ort.InferenceSession, feeds: Record<string, OrtTensor>, n = 12) {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = now();
    await session.run(feeds);
    if (i >= 2) times.push(now() - t);
  }
  return median(times);
}

/**
 * onnxruntime's view of a bare decode pass: its profiler's kernel time per op type (ms per pass)
 * and the whole run as it sees it; then the same pass under other thread settings.
 */
async function kernelProfile(m: LoadedModel, o: Options) {
  const file = path.join(m.dir, m.graphFile);
  const feeds = bareFeeds(m, 64);
  const prefix = path.join(os.tmpdir(), `lmp-ort-profile-${process.pid}`);
  const s = await ort.InferenceSession.create(file, {
    ...sessionOptions({ threads: o.threads }),
    enableProfiling: true,
    profileFilePrefix: prefix,
  });
  const warm = 3;
  const passes = 12;
  for (let i = 0; i < warm + passes; i++) await s.run(feeds);
  s.endProfiling();
  await s.release();
  const traceFile = path.join(
    path.dirname(prefix),
    readdirSync(path.dirname(prefix)).find((f) => f.startsWith(path.basename(prefix)))!,
  );
  const all = JSON.parse(readFileSync(traceFile, "utf8")) as {
    cat: string;
    name: string;
    ts: number;
    dur: number;
    args?: { op_name?: string };
  }[];
  rmSync(traceFile, { force: true });
  // The first passes allocate onnxruntime's arenas: count only what starts with pass warm + 1.
  const starts = all
    .filter((e) => e.cat === "Session" && e.name === "model_run")
    .map((e) => e.ts)
    .sort((a, b) => a - b);
  const events = all.filter((e) => e.ts >= starts[warm]);
  const byOp = new Map<string, number>();
  let kernels = 0;
  let runs = 0;
  for (const e of events) {
    if (e.cat === "Node" && e.name.endsWith("_kernel_time")) {
      const op = e.args?.op_name ?? "?";
      byOp.set(op, (byOp.get(op) ?? 0) + e.dur);
      kernels += e.dur;
    } else if (e.cat === "Session" && e.name === "model_run") runs += e.dur;
  }
  const perPass = (us: number) => us / 1000 / passes;
  const ops = [...byOp.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 6)
    .map(([op, us]) => `${op} ${perPass(us).toFixed(2)}`);
  // The same pass under other settings (fresh sessions; each loads the graph again).
  const variants: Record<string, ort.InferenceSession.SessionOptions> = {
    current: sessionOptions({ threads: o.threads }),
    // pool threads spin between the ops of a run, and stop when it returns (force_spinning_stop)
    spin_in_run: {
      ...sessionOptions({ threads: o.threads }),
      extra: {
        session: { intra_op: { allow_spinning: "1" }, inter_op: { allow_spinning: "0" }, force_spinning_stop: "1" },
      },
    },
    one_thread: sessionOptions({ threads: 1 }),
  };
  const settings: Record<string, number> = {};
  for (const [name, opts] of Object.entries(variants)) {
    const v = await ort.InferenceSession.create(file, opts);
    settings[name] = await timeRuns(v, feeds);
    await v.release();
  }
  return { kernelMs: perPass(kernels), runMs: perPass(runs), ops, settings };
}

async function measureOurs(m: ModelFiles, dtype: WeightFormat, o: Options) {
  const engine = engineFor(m, dtype, o);
  const lm = await engine.load();
  const out: Record<string, number> = {};
  const notes: string[] = [];
  // Warm-up (onnxruntime allocates its arenas on the first passes).
  await engine.generate({ prompt: PROMPT, max_tokens: 8, temperature: 0 });
  await waitQuiet(o);
  let a = cpuTicks();
  const rates: number[] = [];
  for (let r = 0; r < o.runs; r++) rates.push(await decodeRate(engine, lm, o.tokens, 1));
  out.decode = median(rates);
  out.decodeForeign = foreignPct(a, cpuTicks());
  notes.push(`decode ${rates.map((x) => x.toFixed(1)).join(", ")} tok/s`);

  await waitQuiet(o);
  const promptIds = Array.from({ length: PREFILL_TOKENS }, (_, i) => 1 + ((i * 7919) % (m.shape.vocabSize - 2)));
  a = cpuTicks();
  const prefill: number[] = [];
  for (let r = 0; r < o.runs; r++) {
    const t = now();
    await engine.generate({ prompt: promptIds, max_tokens: 1, temperature: 0 });
    prefill.push(PREFILL_TOKENS / ((now() - t) / 1000));
  }
  out.prefill = median(prefill);
  out.prefillForeign = foreignPct(a, cpuTicks());
  notes.push(`prefill ${prefill.map((x) => x.toFixed(0)).join(", ")} tok/s`);

  if (o.batch && dtype === "fp32") {
    await waitQuiet(o);
    a = cpuTicks();
    const agg: number[] = [];
    for (let r = 0; r < o.runs; r++) agg.push(await decodeRate(engine, lm, o.tokens, 8));
    out.batch8 = median(agg);
    out.batch8Foreign = foreignPct(a, cpuTicks());
    notes.push(`8 streams ${agg.map((x) => x.toFixed(1)).join(", ")} tok/s`);
  }
  if (o.profile && (dtype === "fp32" || dtype === "q4")) {
    await waitQuiet(o);
    const p = await profileSteps(engine, lm, o.tokens);
    Object.assign(out, { step_ms: p.stepMs, ort_ms: p.ortMs, js_ms: p.jsMs });
    const k = await kernelProfile(lm, o);
    Object.assign(out, {
      kernel_ms: k.kernelMs,
      ort_run_ms: k.runMs,
      ...Object.fromEntries(Object.entries(k.settings).map(([n, v]) => [`bare_${n}_ms`, v])),
    });
    notes.push(
      `profile: step ${p.stepMs.toFixed(2)} ms = session.run ${p.ortMs.toFixed(2)} + JS ${p.jsMs.toFixed(2)}; ` +
        `bare pass (64 past): onnxruntime run ${k.runMs.toFixed(2)} ms, kernels ${k.kernelMs.toFixed(2)} ms ` +
        `[${k.ops.join(", ")}]; bare pass by setting: ${Object.entries(k.settings)
          .map(([n, v]) => `${n} ${v.toFixed(2)} ms`)
          .join(", ")}`,
    );
  }
  await engine.dispose();
  return { figures: out, notes };
}

// ---- llama.cpp ----

function llamaBench(tools: LlamaCppTools, gguf: string, o: Options, p: number, n: number) {
  const a = cpuTicks();
  const out = execFileSync(
    tools.llamaBench,
    ["-m", gguf, "-t", String(o.threads), "-p", String(p), "-n", String(n), "-r", String(o.runs), "-o", "jsonl"],
    { cwd: path.dirname(tools.llamaBench), encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], maxBuffer: 2 ** 26 },
  );
  const foreign = foreignPct(a, cpuTicks());
  const j = JSON.parse(out.trim().split("\n").at(-1)!) as {
    samples_ts: number[];
    avg_ts: number;
    build_commit: string;
  };
  return { tokS: median(j.samples_ts), samples: j.samples_ts, foreign, build: j.build_commit };
}

/** llama-batched-bench: 8 sequences decoding together; S_TG (aggregate decode tokens/s), median of `runs` rows. */
function batchedBench(tools: LlamaCppTools, gguf: string, o: Options) {
  const a = cpuTicks();
  const npl = Array.from({ length: o.runs }, () => "8").join(",");
  const out = execFileSync(
    tools.batchedBench!,
    ["-m", gguf, "-t", String(o.threads), "-c", "2048", "-b", "2048", "-ub", "512"].concat(
      ["-npp", "32", "-ntg", String(o.tokens), "-npl", npl],
      ["-tb", String(o.threads)],
    ),
    { cwd: path.dirname(tools.batchedBench!), encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], maxBuffer: 2 ** 26 },
  );
  const foreign = foreignPct(a, cpuTicks());
  const lines = out.split("\n").filter((l) => l.trim().startsWith("|"));
  const header = lines
    .find((l) => l.includes("S_TG"))
    ?.split("|")
    .map((c) => c.trim());
  if (!header) throw new Error(`llama-batched-bench printed no table:\n${out}`);
  const col = header.indexOf("S_TG t/s");
  const rows = lines
    .map((l) => l.split("|").map((c) => c.trim()))
    .filter((c) => /^\d+$/.test(c[1] ?? ""))
    .map((c) => Number(c[col]));
  return { tokS: median(rows), samples: rows, foreign };
}

// ---- the run ----

export default async function bench(args: string[]) {
  const o = parseArgs(args);
  log(`llamacpp bench: size ${o.size}, ${o.threads} threads, load ${loadavg()}, ${os.cpus().length} CPUs`);
  const m = await prepareModel(o);
  const tools = ensureTools(log);
  checkGguf(tools, m);
  const par = await parity(tools, m, o);

  const res: Record<string, number> = {};
  const foreign: number[] = [];
  let build = "";
  for (const dtype of o.dtypes) {
    const t = now();
    const ours = await measureOurs(m, dtype, o);
    const f = ours.figures;
    foreign.push(f.decodeForeign, f.prefillForeign);
    for (const n of ours.notes) log(`[${dtype}] ours: ${n}`);

    await waitQuiet(o);
    const tg = llamaBench(tools, m.gguf[KIND[dtype]], o, 0, o.tokens);
    build = tg.build;
    await waitQuiet(o);
    const pp = llamaBench(tools, m.gguf[KIND[dtype]], o, PREFILL_TOKENS, 0);
    foreign.push(tg.foreign, pp.foreign);
    log(
      `[${dtype}] llama.cpp ${KIND[dtype].toUpperCase()}: decode ${tg.samples.map((x) => x.toFixed(1)).join(", ")} tok/s, ` +
        `prefill ${pp.samples.map((x) => x.toFixed(0)).join(", ")} tok/s`,
    );
    res[`${dtype}_decode_vs_llamacpp`] = f.decode / tg.tokS;
    res[`${dtype}_prefill_vs_llamacpp`] = f.prefill / pp.tokS;
    res[`${dtype}_decode_tok_s`] = f.decode;
    res[`${dtype}_llamacpp_decode_tok_s`] = tg.tokS;
    res[`${dtype}_prefill_tok_s`] = f.prefill;
    res[`${dtype}_llamacpp_prefill_tok_s`] = pp.tokS;
    for (const k of ["step_ms", "ort_ms", "js_ms", "kernel_ms", "ort_run_ms"])
      if (f[k] !== undefined) res[`${dtype}_${k}`] = f[k];
    for (const k of Object.keys(f).filter((k) => k.startsWith("bare_"))) res[`${dtype}_${k}`] = f[k];

    if (f.batch8 !== undefined) {
      foreign.push(f.batch8Foreign);
      res.batch8_tok_s = f.batch8;
      if (tools.batchedBench) {
        await waitQuiet(o);
        const bb = batchedBench(tools, m.gguf[KIND[dtype]], o);
        foreign.push(bb.foreign);
        log(`[${dtype}] llama.cpp 8 parallel sequences: ${bb.samples.map((x) => x.toFixed(1)).join(", ")} tok/s`);
        res.llamacpp_batch8_tok_s = bb.tokS;
        res.batch8_vs_llamacpp = f.batch8 / bb.tokS;
      } else log(`[${dtype}] llama-batched-bench unavailable: ${tools.batchedBenchError}`);
    }
    log(
      `[${dtype}] decode ${f.decode.toFixed(1)} vs ${tg.tokS.toFixed(1)} tok/s (${(f.decode / tg.tokS).toFixed(2)}), ` +
        `prefill ${f.prefill.toFixed(0)} vs ${pp.tokS.toFixed(0)} tok/s (${(f.prefill / pp.tokS).toFixed(2)}); ` +
        `${((now() - t) / 1000).toFixed(0)} s`,
    );
  }
  const r3 = (x: number | undefined) => (x === undefined ? null : Math.round(x * 1000) / 1000);
  const fp32 = res.fp32_decode_tok_s;
  const summary = {
    bench: "llamacpp",
    fp32_decode_vs_llamacpp: r3(res.fp32_decode_vs_llamacpp),
    fp16_decode_vs_llamacpp: r3(res.fp16_decode_vs_llamacpp),
    q8_decode_vs_llamacpp: r3(res.q8_decode_vs_llamacpp),
    q4_decode_vs_llamacpp: r3(res.q4_decode_vs_llamacpp),
    prefill_vs_llamacpp: r3(res.fp32_prefill_vs_llamacpp),
    batch8_vs_llamacpp: r3(res.batch8_vs_llamacpp),
    fp32_weights_gb_per_s: r3(fp32 === undefined ? undefined : (fp32 * m.fp32BytesPerToken) / 1e9),
    ...Object.fromEntries(
      Object.entries(res)
        .filter(([k]) => !/^fp32_prefill_vs|^batch8_vs|_decode_vs_/.test(k))
        .map(([k, v]) => [k, r3(v)]),
    ),
    parity_tokens: par.tokens,
    parity_first_step_max_rel_prob_diff: Number(par.probDiff.toExponential(2)),
    threads: o.threads,
    size: o.size,
    llamacpp_build: build,
    max_foreign_cpu_pct: Math.max(0, ...foreign),
    loadavg: loadavg(),
  };
  console.log(JSON.stringify(summary));
}
