// `npm run bench -- engine [--quick]`: the inference engine on the larger generated model
// (~26M parameters), every figure a ratio against a reference measured in the same run:
//   decode_vs_reference  single-stream greedy decode tokens/s, ours / transformers.js generate()
//   batch8_speedup       aggregate tokens/s of 8 concurrent streams / one stream alone
//   ttft_loaded_vs_idle  time to first token while 8 streams run / on an idle engine
//   rss_growth           resident memory after 1,000 sequential requests / after the first 100
// The last line printed is one JSON object with those four keys.
import v8 from "node:v8";
import vm from "node:vm";
import { Engine } from "../../workers/engine/engine";
import type { LoadedModel } from "../../workers/engine/model-loader";
import { cachedTinyModel } from "../tiny-model/generate";

const now = () => performance.now();
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;

const PROMPT = "Once upon a time there was a small village near a river. The people of the village were";
const LONG_PROMPT =
  "Good morning, everyone. Today we will talk about the history of the river and the old bridge in our town. " +
  "The bridge was built two hundred years ago with stones from the hills, and it still stands today. " +
  "In the evening the old man sat by the fire and told stories about the sea.";

export default async function bench(args: string[]) {
  const quick = args.includes("--quick");
  const t0 = now();
  const dir = await cachedTinyModel({ large: true });
  const engine = new Engine({ models: [dir] }); // default batch size, queue and prefill chunk
  const m = await engine.load();
  const noEos = Object.fromEntries(m.info.eosTokenIds.map((id) => [String(id), -100]));
  console.log(`model ${dir} ready in ${((now() - t0) / 1000).toFixed(1)}s`);

  // Warm-up (first runs allocate ONNX Runtime arenas).
  await engine.generate({ prompt: PROMPT, max_tokens: 8, temperature: 0 });
  await referenceGenerate(m, PROMPT, 8);

  // 1. Single-stream decode: (time(N) - time(1)) / (N - 1) isolates decoding from the prompt
  // pass. Ours and the reference alternate and the best round of each counts, so background
  // load on the machine hits both alike.
  const N = quick ? 48 : 128;
  const oursRun = async (n: number) =>
    (await engine.generate({ prompt: PROMPT, max_tokens: n, temperature: 0, logit_bias: noEos })).usage
      .completion_tokens;
  const refRun = (n: number) => referenceGenerate(m, PROMPT, n);
  const oursRates: number[] = [];
  const refRates: number[] = [];
  for (let round = 0; round < (quick ? 3 : 5); round++) {
    oursRates.push(await decodeRate(oursRun, N));
    refRates.push(await decodeRate(refRun, N));
  }
  const ours = Math.max(...oursRates);
  const ref = Math.max(...refRates);
  const decodeVsReference = ours / ref;
  console.log(
    `single-stream decode: ours ${ours.toFixed(1)} tok/s, generate() ${ref.toFixed(1)} tok/s → ${decodeVsReference.toFixed(2)}`,
  );

  // 2. Aggregate throughput at 8 concurrent streams vs one stream, same request shape.
  const streamReq = (seed: number) => ({ prompt: PROMPT, max_tokens: N, seed, temperature: 0.8, logit_bias: noEos });
  let single = 0;
  let aggregate = 0;
  for (let round = 0; round < 2; round++) {
    let t = now();
    single = Math.max(single, (await engine.generate(streamReq(1))).usage.completion_tokens / ((now() - t) / 1000));
    t = now();
    const eight = await Promise.all(Array.from({ length: 8 }, (_, i) => engine.generate(streamReq(i + 1))));
    aggregate = Math.max(aggregate, eight.reduce((a, r) => a + r.usage.completion_tokens, 0) / ((now() - t) / 1000));
  }
  const batch8Speedup = aggregate / single;
  console.log(
    `throughput: 1 stream ${single.toFixed(1)} tok/s, 8 streams ${aggregate.toFixed(1)} tok/s → ${batch8Speedup.toFixed(2)}x`,
  );

  // 3. Time to first token of a new request: idle engine vs while 8 streams decode.
  const ttft = async () => {
    const start = now();
    for await (const e of await engine.start({ prompt: LONG_PROMPT, max_tokens: 1, temperature: 0 }))
      if (e.type === "delta" || e.type === "finish") break;
    return now() - start;
  };
  const idle: number[] = [];
  for (let i = 0; i < 5; i++) idle.push(await ttft());
  const background = Array.from({ length: 8 }, (_, i) =>
    engine.generate({ ...streamReq(i + 10), max_tokens: quick ? 150 : 400 }),
  );
  await new Promise((r) => setTimeout(r, 300)); // let the 8 streams get into steady decoding
  const loaded: number[] = [];
  for (let i = 0; i < 5; i++) loaded.push(await ttft());
  await Promise.all(background);
  const ttftRatio = median(loaded) / median(idle);
  console.log(
    `ttft (${m.tokenizer.encode(LONG_PROMPT).length}-token prompt): idle ${median(idle).toFixed(1)} ms, under 8 streams ${median(loaded).toFixed(1)} ms → ${ttftRatio.toFixed(2)}`,
  );

  // 4. Memory: RSS after 1,000 sequential requests vs after the first 100.
  const total = quick ? 300 : 1000;
  let rss100 = 0;
  for (let i = 1; i <= total; i++) {
    await engine.generate({ prompt: `${PROMPT} ${i}`, max_tokens: 4, seed: i, logprobs: 2, stop: ["zz"] });
    if (i === 100 || i === total) {
      gc();
      await new Promise((r) => setTimeout(r, 20));
      if (i === 100) rss100 = process.memoryUsage().rss;
    }
  }
  const rssEnd = process.memoryUsage().rss;
  const rssGrowth = rssEnd / rss100;
  console.log(
    `rss: after 100 requests ${(rss100 / 2 ** 20).toFixed(0)} MiB, after ${total} ${(rssEnd / 2 ** 20).toFixed(0)} MiB → ${rssGrowth.toFixed(3)}`,
  );

  const round = (x: number) => Math.round(x * 1000) / 1000;
  console.log(
    JSON.stringify({
      bench: "engine",
      decode_vs_reference: round(decodeVsReference),
      batch8_speedup: round(batch8Speedup),
      ttft_loaded_vs_idle: round(ttftRatio),
      rss_growth: round(rssGrowth),
    }),
  );
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
async function referenceGenerate(m: LoadedModel, prompt: string, n: number): Promise<number> {
  const enc = m.tokenizer(prompt);
  const out = (await m.model.generate({
    ...enc,
    max_new_tokens: n,
    min_new_tokens: n,
    do_sample: false,
  })) as unknown as { dims: number[] };
  return out.dims[1] - enc.input_ids.dims[1];
}
