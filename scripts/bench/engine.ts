// `npm run bench -- engine [--quick] [--dtypes=fp32,q4,…] [--attention=gqa] [--hybrid] [--row-quantization=off]`: the
// inference engine on a generated llama-shaped model of 134M parameters (the llama.cpp anchor's
// shape: hidden 768, 12 layers, vocabulary 32,000) in the standard export layout (or with
// --attention=gqa, the onnxruntime-genai builder's GroupQueryAttention one; with --hybrid, an
// LFM2-style hybrid whose even layers are short convolutions with a past_conv.N state), one graph
// file per dtype (fp32, fp16, q8, q4). `--row-quantization=off` serves the q8 (int8, uint8) files
// as they are, one row per pass (WORKER_ROW_QUANTIZATION=off), to compare. The engine runs without
// its prompt cache (WORKER_PROMPT_CACHE_MB=0), so that every figure times each prompt's prefill:
// the bench repeats its prompts (the 8 streams' prompts are one, the decode rates subtract a run of
// the same prompt). `--prompt-cache` turns it on, to see what it does to the 8 streams (the
// decode rates and times to first token then time cached prompts: read only the throughput), and
// adds shared_prefix_ttft_speedup: the first token of a question after a ~700-token system prompt,
// the system prompt's first question / the next ones (which start from its kept chunks); and
// chat_next_turn_ttft_speedup: the first token of a conversation's second turn after a 256-token
// answer, when only the first turn's prompt was kept / when its answer was kept too; and
// many_chats_next_turn_ttft_speedup: the same for 12 conversations at once, with the cache kept
// to its 64 MiB / also in the KV budget's idle room (the worker's default).
// Every figure is a ratio against a reference measured in the same run, per dtype:
//   decode_vs_reference  single-stream greedy decode tokens/s, ours / transformers.js generate()
//                        on the same file and dtype
//   batch8_speedup       aggregate tokens/s of 8 concurrent streams / one stream alone
//   ttft_loaded_vs_idle  time to first token while 8 streams run / on an idle engine
//   long_prompt_vs_reference  time to the first token of a ~1,900-token prompt, generate() / ours
//                        (higher is faster; ours prefills in chunks of 128, generate() in one pass)
//   load_vs_reference    our loadModel() time / transformers.js from_pretrained() (model + tokenizer)
//   memory_mb            resident memory the loaded model adds (MiB, measured in a fresh process)
//   rss_growth           (fp32 only) RSS after 1,000 sequential requests / after the first 100
//   step_ms_b1, _b8      one bare onnxruntime decode pass (32 tokens of past) for 1 and 8 rows:
//                        what the graph costs without the engine, and how it scales with rows
// The last line printed is one JSON object: fp32's figures under these names, the others as
// <dtype>_<figure> (q4_batch8_speedup, …), plus the raw rates (decode_tok_s, reference_tok_s, …).
import type { PreTrainedModel } from "@huggingface/transformers";
import { AutoModelForCausalLM, AutoTokenizer } from "../../workers/engine/transformers";
import { execFileSync } from "node:child_process";
import path from "node:path";
import { renderChat } from "../../workers/engine/chat-template";
import { Engine } from "../../workers/engine/engine";
import type { LoadedModel } from "../../workers/engine/model/load-model";
import { int64Tensor, kvTensor, newKvArray, type OrtTensor } from "../../workers/engine/model/session";
import { WEIGHT_FORMATS, type WeightFormat } from "../tiny-model/graph-parts";
import { cachedTinyModel } from "../tiny-model/generate";
import { collectGarbage } from "@/lib/gc";

const now = () => performance.now();
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const MiB = 2 ** 20;

const settle = async () => {
  collectGarbage();
  await new Promise((r) => setTimeout(r, 50));
};

const PROMPT = "Once upon a time there was a small village near a river. The people of the village were";
const LONG_PROMPT =
  "Good morning, everyone. Today we will talk about the history of the river and the old bridge in our town. " +
  "The bridge was built two hundred years ago with stones from the hills, and it still stands today. " +
  "In the evening the old man sat by the fire and told stories about the sea.";
const DTYPES: WeightFormat[] = ["fp32", "fp16", "q8", "q4"];

export default async function bench(args: string[]) {
  const quick = args.includes("--quick");
  const only = args
    .find((a) => a.startsWith("--dtypes="))
    ?.slice("--dtypes=".length)
    .split(",");
  // Any generated format may be named (int8, uint8, q4f16, q2, q2f16…); the default is the four above.
  const unknown = only?.filter((d) => !(WEIGHT_FORMATS as readonly string[]).includes(d)) ?? [];
  if (unknown.length) throw new Error(`--dtypes takes ${WEIGHT_FORMATS.join(", ")}, not ${unknown.join(", ")}`);
  const dtypes = only ? WEIGHT_FORMATS.filter((d) => only.includes(d)) : DTYPES;
  // --attention=gqa: the same weights exported with com.microsoft GroupQueryAttention (the
  // onnxruntime-genai model builder's layout, served by the engine's gqa layout).
  const attention = args.find((a) => a.startsWith("--attention="))?.slice("--attention=".length) ?? "standard";
  if (attention !== "standard" && attention !== "gqa")
    throw new Error(`--attention takes standard or gqa, not ${attention}`);
  const hybrid = args.includes("--hybrid");
  const rowWise = !args.includes("--row-quantization=off");
  const promptCache = args.includes("--prompt-cache");
  if (hybrid && attention === "gqa") throw new Error("--hybrid models use the standard attention layout");
  let t = now();
  // All four files are generated once (cached under the OS temp folder): ~1.1 GB. The q4 file
  // declares MatMulNBits accuracy_level 4 (int8 compute), as onnxruntime-genai's CPU int4
  // exports do: with it unset (transformers.js' q4 files) onnxruntime dequantizes every weight
  // matrix on each batched pass (see docs/api.md, "dtype").
  const files = [...new Set([...DTYPES, ...dtypes])];
  const dir = await cachedTinyModel({
    family: "llama",
    size: "bench",
    dtypes: files,
    q4Accuracy: 4,
    attention,
    hybrid,
  });
  console.log(`model ${dir} ready in ${((now() - t) / 1000).toFixed(1)}s`);
  const results: Record<string, number> = {};
  for (const dtype of dtypes) {
    t = now();
    const figures = await benchDtype(dir, dtype, quick, rowWise, promptCache);
    for (const [k, v] of Object.entries(figures)) results[dtype === "fp32" ? k : `${dtype}_${k}`] = v;
    console.log(`${dtype}: done in ${((now() - t) / 1000).toFixed(0)}s`);
  }
  const round = (x: number) => Math.round(x * 1000) / 1000;
  console.log(
    JSON.stringify({
      bench: "engine",
      ...(attention === "gqa" ? { attention } : {}),
      ...(hybrid ? { hybrid } : {}),
      ...(rowWise ? {} : { row_quantization: "off" }),
      ...(promptCache ? { prompt_cache: "on" } : {}),
      ...Object.fromEntries(Object.entries(results).map(([k, v]) => [k, round(v)])),
    }),
  );
}

async function benchDtype(
  dir: string,
  dtype: WeightFormat,
  quick: boolean,
  rowWiseQuantization: boolean,
  promptCache: boolean,
): Promise<Record<string, number>> {
  const log = (s: string) => console.log(`[${dtype}] ${s}`);
  const memoryMb = modelMemory(dir, dtype, rowWiseQuantization) / MiB;
  let t = now();
  // Default batch, queue, chunk.
  const engine = new Engine({
    models: [dir],
    loadOptions: () => ({ dtype, rowWiseQuantization }),
    ...(promptCache ? {} : { promptCacheBytes: 0 }),
  });
  const m = await engine.load();
  const loadMs = now() - t;
  t = now();
  const [ref] = await Promise.all([
    AutoModelForCausalLM.from_pretrained(dir, { dtype, local_files_only: true }),
    AutoTokenizer.from_pretrained(dir, { local_files_only: true }),
  ]);
  const refLoadMs = now() - t;
  log(
    `loaded in ${loadMs.toFixed(0)} ms (transformers.js ${refLoadMs.toFixed(0)} ms), +${memoryMb.toFixed(0)} MiB, ` +
      `layout ${m.info.layout}`,
  );
  const noEos = Object.fromEntries(m.info.eosTokenIds.map((id) => [String(id), -100]));
  const steps = { b1: await stepMs(m, 1), b8: await stepMs(m, 8) };
  log(`bare decode pass: ${steps.b1.toFixed(1)} ms for 1 row, ${steps.b8.toFixed(1)} ms for 8 rows`);

  // Warm-up (first runs allocate ONNX Runtime arenas).
  await engine.generate({ prompt: PROMPT, max_tokens: 8, temperature: 0 });
  await referenceGenerate(ref, m, PROMPT, 8);

  // 1. Single-stream decode: (time(N) - time(1)) / (N - 1) isolates decoding from the prompt
  // pass. Ours and the reference alternate and the best round of each counts, so background
  // load on the machine hits both alike.
  const N = quick ? 24 : 128;
  const oursRun = async (n: number) =>
    (await engine.generate({ prompt: PROMPT, max_tokens: n, temperature: 0, logit_bias: noEos })).usage
      .completion_tokens;
  const refRun = (n: number) => referenceGenerate(ref, m, PROMPT, n);
  const oursRates: number[] = [];
  const refRates: number[] = [];
  for (let round = 0; round < (quick ? 2 : 5); round++) {
    oursRates.push(await decodeRate(oursRun, N));
    refRates.push(await decodeRate(refRun, N));
  }
  const ours = Math.max(...oursRates);
  const reference = Math.max(...refRates);
  log(`single-stream decode: ours ${ours.toFixed(1)} tok/s, generate() ${reference.toFixed(1)} tok/s`);

  // 2. Aggregate throughput at 8 concurrent streams vs one stream, same request shape.
  const streamReq = (seed: number) => ({ prompt: PROMPT, max_tokens: N, seed, temperature: 0.8, logit_bias: noEos });
  let single = 0;
  let aggregate = 0;
  for (let round = 0; round < (quick ? 1 : 2); round++) {
    let t1 = now();
    single = Math.max(single, (await engine.generate(streamReq(1))).usage.completion_tokens / ((now() - t1) / 1000));
    t1 = now();
    const eight = await Promise.all(Array.from({ length: 8 }, (_, i) => engine.generate(streamReq(i + 1))));
    aggregate = Math.max(aggregate, eight.reduce((a, r) => a + r.usage.completion_tokens, 0) / ((now() - t1) / 1000));
  }
  log(`throughput: 1 stream ${single.toFixed(1)} tok/s, 8 streams ${aggregate.toFixed(1)} tok/s`);

  // 3. Time to first token of a new request: idle engine vs while 8 streams decode.
  const ttft = async (prompt: string | Record<string, unknown> = LONG_PROMPT, on = engine) => {
    const start = now();
    const request = typeof prompt === "string" ? { prompt } : prompt;
    for await (const e of await on.start({ ...request, max_tokens: 1, temperature: 0 }))
      if (e.type === "delta" || e.type === "finish") break;
    return now() - start;
  };
  const idle: number[] = [];
  for (let i = 0; i < (quick ? 3 : 5); i++) idle.push(await ttft());
  const background = Array.from({ length: 8 }, (_, i) =>
    engine.generate({ ...streamReq(i + 10), max_tokens: quick ? 60 : 400 }),
  );
  await new Promise((r) => setTimeout(r, quick ? 300 : 1000)); // let the 8 streams get into steady decoding
  const loaded: number[] = [];
  for (let i = 0; i < (quick ? 3 : 5); i++) loaded.push(await ttft());
  await Promise.all(background);
  log(
    `ttft (${m.tokenizer.encode(LONG_PROMPT).length}-token prompt): idle ${median(idle).toFixed(0)} ms, under 8 streams ${median(loaded).toFixed(0)} ms`,
  );

  // 4. A prompt of about 1,900 tokens (a retrieval context): time to its first token on an idle
  // engine, which prefills it in chunks of 128, against generate() on the same prompt (one pass);
  // alternated, best of each.
  let context = "";
  while (m.tokenizer.encode(context).length < 1900) context += LONG_PROMPT + " ";
  const contextTokens = m.tokenizer.encode(context).length;
  const oursPrefill: number[] = [];
  const refPrefill: number[] = [];
  for (let round = 0; round < (quick ? 1 : 3); round++) {
    let t1 = now();
    await engine.generate({ prompt: context, max_tokens: 1, temperature: 0 });
    oursPrefill.push(now() - t1);
    t1 = now();
    await referenceGenerate(ref, m, context, 1);
    refPrefill.push(now() - t1);
  }
  log(
    `${contextTokens}-token prompt, first token: ours ${Math.min(...oursPrefill).toFixed(0)} ms, ` +
      `generate() ${Math.min(...refPrefill).toFixed(0)} ms`,
  );

  const figures: Record<string, number> = {
    decode_vs_reference: ours / reference,
    batch8_speedup: aggregate / single,
    ttft_loaded_vs_idle: median(loaded) / median(idle),
    long_prompt_vs_reference: Math.min(...refPrefill) / Math.min(...oursPrefill),
    long_prompt_ms: Math.min(...oursPrefill),
    load_vs_reference: loadMs / refLoadMs,
    memory_mb: memoryMb,
    decode_tok_s: ours,
    reference_tok_s: reference,
    batch8_tok_s: aggregate,
    step_ms_b1: steps.b1,
    step_ms_b8: steps.b8,
  };
  // 6. With the prompt cache: a shared system prompt of about 700 tokens (its cache fits the
  // default 64 MiB) followed by different questions. Each new system prompt's first question is
  // prefilled whole; the next ones start from its kept whole chunks.
  if (promptCache) {
    const cold: number[] = [];
    const warm: number[] = [];
    for (let round = 0; round < (quick ? 1 : 3); round++) {
      let system = `System ${round}: you answer questions about the town.`;
      while (m.tokenizer.encode(system).length < 700) system += ` ${LONG_PROMPT}`;
      cold.push(await ttft(`${system}\nQuestion 0: who built the bridge?`));
      for (let q = 1; q <= 3; q++) warm.push(await ttft(`${system}\nQuestion ${q}: what is under bridge ${q}?`));
    }
    log(
      `shared system prompt, first token: first question ${median(cold).toFixed(0)} ms, next ones ${median(warm).toFixed(0)} ms`,
    );
    figures.shared_prefix_ttft_speedup = median(cold) / median(warm);

    // 7. A conversation's next turn: its first turn (a 256-token answer) sent as a chat, whose
    // answer is kept, against the very same first turn sent as a prompt request, whose prompt
    // alone is kept (as before kept answers). Then the same second turn from each team, as the
    // ids of the first turn, its answer and a new message: the bench model's tokenizer spells
    // its tokens out as text that does not encode back to them, where a real model's answer,
    // sent back as the model wrote it, does.
    const keptTurn: number[] = [];
    const promptOnly: number[] = [];
    let reused = 0;
    let turnTokens = 0;
    for (let round = 0; round < (quick ? 1 : 3); round++) {
      const first = [{ role: "user" as const, content: `Round ${round}: tell me a long story about the village.` }];
      const turn1 = { max_tokens: quick ? 64 : 256, temperature: 0, logit_bias: noEos, logprobs: 1 };
      const answer = await engine.generate({ ...turn1, messages: first, tenant: `chat-${round}` });
      const ids = m.tokenizer.encode(renderChat(m.tokenizer, first), { add_special_tokens: false });
      await engine.generate({ ...turn1, prompt: ids, tenant: `prompt-${round}` });
      const generated = answer.choices[0].logprobs!.map((l) => l.token_id);
      const next = [...ids, ...generated, ...m.tokenizer.encode("\nAnd then?\n", { add_special_tokens: false })];
      turnTokens = next.length;
      const before = (await engine.scheduler()).stats().promptCachePrefixTokens;
      keptTurn.push(await ttft({ prompt: next, tenant: `chat-${round}` }));
      reused = (await engine.scheduler()).stats().promptCachePrefixTokens - before;
      promptOnly.push(await ttft({ prompt: next, tenant: `prompt-${round}` }));
    }
    log(
      `a chat's next turn (${turnTokens} tokens), first token: with its first answer kept ` +
        `${median(keptTurn).toFixed(0)} ms (${reused} tokens reused), its first prompt only ${median(promptOnly).toFixed(0)} ms`,
    );
    figures.chat_next_turn_ttft_speedup = median(promptOnly) / median(keptTurn);

    // 8. Many conversations at once: 12 of them (a ~200-token first message each, 64-token
    // answers) hold ~19 MB each in fp32, so 64 MiB (WORKER_PROMPT_CACHE_MB) keeps the last three.
    // Their second turns' first tokens, with the cache kept to 64 MiB / with it also in the KV
    // budget's idle room (WORKER_PROMPT_CACHE_IDLE, the worker's default), each on an engine of
    // its own with the default budget (half the memory left).
    const conversations = quick ? 6 : 12;
    const secondTurns: Record<string, number[]> = {};
    const reusedTokens: Record<string, number> = {};
    for (const idle of [false, true]) {
      const own = new Engine({
        models: [dir],
        loadOptions: () => ({ dtype, rowWiseQuantization }),
        promptCacheIdleKv: idle,
      });
      const om = await own.load();
      const firsts = Array.from({ length: conversations }, (_, c) => {
        let content = `Conversation ${c}: tell me about the village.`;
        while (om.tokenizer.encode(content).length < 200) content += ` ${LONG_PROMPT}`;
        return [{ role: "user" as const, content }];
      });
      const turn1 = { max_tokens: 64, temperature: 0, logit_bias: noEos, logprobs: 1 };
      const answers = await Promise.all(firsts.map((first) => own.generate({ ...turn1, messages: first })));
      const before = (await own.scheduler()).stats().promptCachePrefixTokens;
      const times: number[] = [];
      for (const [c, first] of firsts.entries()) {
        const ids = om.tokenizer.encode(renderChat(om.tokenizer, first), { add_special_tokens: false });
        const generated = answers[c].choices[0].logprobs!.map((l) => l.token_id);
        const next = [...ids, ...generated, ...om.tokenizer.encode("\nAnd then?\n", { add_special_tokens: false })];
        times.push(await ttft({ prompt: next }, own));
      }
      const key = idle ? "idle" : "fixed";
      secondTurns[key] = times;
      reusedTokens[key] = (await own.scheduler()).stats().promptCachePrefixTokens - before;
      await own.dispose();
    }
    log(
      `${conversations} conversations' second turns, first token: cache in 64 MiB ${median(secondTurns.fixed).toFixed(0)} ms ` +
        `(${reusedTokens.fixed} tokens reused), also in the KV budget's idle room ${median(secondTurns.idle).toFixed(0)} ms ` +
        `(${reusedTokens.idle} tokens reused)`,
    );
    figures.many_chats_next_turn_ttft_speedup = median(secondTurns.fixed) / median(secondTurns.idle);
  }
  await ref.dispose();
  // 5. Memory (fp32): RSS after 1,000 sequential requests vs after the first 100.
  if (dtype === "fp32") figures.rss_growth = await rssGrowth(engine, quick ? 200 : 1000);
  await engine.dispose();
  return figures;
}

/** Median time of one bare decode pass of `rows` rows over 32 tokens of (zero) past. */
async function stepMs(m: LoadedModel, rows: number): Promise<number> {
  const { kv } = m.info.graph;
  const past = 32;
  const feeds: Record<string, OrtTensor> = {
    input_ids: int64Tensor(new Array(rows).fill(5), [rows, 1]),
    attention_mask: int64Tensor(new Array(rows * (past + 1)).fill(1), [rows, past + 1]),
  };
  if (m.info.graph.positionIds) feeds.position_ids = int64Tensor(new Array(rows).fill(past), [rows, 1]);
  for (const e of kv.entries)
    feeds[e.past] = kvTensor(kv.type, newKvArray(kv.type, rows * kv.heads * past * kv.headDim), [
      rows,
      kv.heads,
      past,
      kv.headDim,
    ]);
  for (const st of m.info.graph.states)
    feeds[st.past] = kvTensor(st.type, newKvArray(st.type, rows * st.elems), [rows, ...st.dims]);
  const times: number[] = [];
  for (let i = 0; i < 12; i++) {
    const t = now();
    await m.session.run(feeds, { logits: null });
    if (i >= 2) times.push(now() - t);
  }
  return median(times);
}

function modelMemory(dir: string, dtype: WeightFormat, rowWise: boolean): number {
  const script = path.join(import.meta.dirname, "_engine-memory.ts");
  const args = ["--import", "tsx/esm", script, dir, dtype, rowWise ? "on" : "off"];
  const out = execFileSync(process.execPath, args, { encoding: "utf8" });
  const { before, after } = JSON.parse(out.trim().split("\n").at(-1)!) as { before: number; after: number };
  return after - before;
}

async function rssGrowth(engine: Engine, total: number): Promise<number> {
  let rss100 = 0;
  for (let i = 1; i <= total; i++) {
    await engine.generate({ prompt: `${PROMPT} ${i}`, max_tokens: 4, seed: i, logprobs: 2, stop: ["zz"] });
    if (i === 100) {
      await settle();
      rss100 = process.memoryUsage().rss;
    }
  }
  await settle();
  const rssEnd = process.memoryUsage().rss;
  console.log(
    `[fp32] rss: after 100 requests ${(rss100 / MiB).toFixed(0)} MiB, after ${total} ${(rssEnd / MiB).toFixed(0)} MiB`,
  );
  return rssEnd / rss100;
}

/** Tokens/s of decoding alone: (time(n) - time(1)) over the extra tokens. */
async function decodeRate(run: (n: number) => Promise<number>, n: number): Promise<number> {
  let t = now();
  await run(1);
  const one = now() - t;
  t = now();
  const produced = await run(n);
  const many = now() - t;
  return (produced - 1) / ((many - one) / 1000);
}

/** transformers.js generate(), greedy, EOS suppressed like ours; returns new tokens produced. */
async function referenceGenerate(ref: PreTrainedModel, m: LoadedModel, prompt: string, n: number): Promise<number> {
  const enc = m.tokenizer(prompt);
  const out = (await ref.generate({
    ...enc,
    max_new_tokens: n,
    min_new_tokens: n,
    do_sample: false,
  })) as unknown as { dims: number[] };
  return out.dims[1] - enc.input_ids.dims[1];
}
