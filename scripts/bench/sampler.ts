// `npm run bench -- sampler`: the engine's per-token sampling cost (workers/engine/sampler.ts)
// at the vocabulary sizes of models people deploy (32,000: llama 2, mistral; 128,256: llama 3;
// 151,936: qwen 2.5), for the settings clients send, against the straightforward implementation
// it replaced (the whole vocabulary sorted with a comparator, then top-k / top-p) in the same run.
// Logits are shaped like a model's: a bell-shaped bulk (sd ≈ 2.5) and a few dozen tokens well
// above it. Each setting alternates ours and the reference, median of 5 rounds of 40 tokens.
// Last line: {"bench":"sampler","<setting>_<vocab>_ms":…,"<setting>_<vocab>_vs_reference":…}
// (time ratio: below 1 is faster than the reference).
// Then what a decoding step of 8 rows spends drawing at temperature 0.8 (a ban, as above), with
// top_p 0.9, and with top_k 50 and top_p 0.95, the way the engine draws them: one run of
// onnxruntime's exps session for the 8 rows and a draw per row over its exps
// (workers/engine/sampling-exps.ts), against sampleToken's own passes per row:
// batch8_[top_p_|top_k_top_p_]<vocab>_ms (per step) and …_vs_sampler (time ratio).
import { createPrng } from "../../workers/engine/prng";
import { drawFromExps, ranksFromExps, sampleToken, type SamplingParams } from "../../workers/engine/sampler";
import { SamplingExps } from "../../workers/engine/sampling-exps";
import { drawFrom, fullSortNucleus } from "../../workers/engine/testing/full-sort-sampler";

const VOCABS = [32_000, 128_256, 151_936];
const SETTINGS: [string, Partial<SamplingParams>][] = [
  ["t1", { temperature: 1 }],
  ["t08_ban", { temperature: 0.8, bias: new Map([[2, -100]]) }], // the engine bench's requests
  ["t1_logprobs", { temperature: 1, logprobs: 5 }],
  ["top_p", { temperature: 0.7, topP: 0.9 }],
  ["top_k", { temperature: 0.7, topK: 40 }],
  ["top_k_top_p", { temperature: 0.7, topK: 50, topP: 0.95 }],
];
const base: SamplingParams = { temperature: 1, topP: 1, tfs: 1, repetitionPenalty: 1, bias: new Map() };

export default async function bench() {
  const results: Record<string, number> = {};
  for (const vocab of VOCABS) {
    const logits = modelLikeLogits(vocab, 1);
    for (const [name, setting] of SETTINGS) {
      const p = { ...base, ...setting };
      const ours = () => {
        const prng = createPrng(1);
        for (let i = 0; i < 40; i++) sampleToken(logits, p, { prng, seen: [], banned: [], fallbackToken: 0 });
      };
      const reference = () => {
        const prng = createPrng(1);
        for (let i = 0; i < 40; i++) {
          referenceSample(logits, p, prng.next());
          if (p.logprobs) referenceLogprobs(logits, p.logprobs);
        }
      };
      ours();
      reference();
      const a: number[] = [];
      const b: number[] = [];
      for (let round = 0; round < 5; round++) {
        a.push(timed(ours) / 40);
        b.push(timed(reference) / 40);
      }
      const [oursMs, refMs] = [median(a), median(b)];
      console.log(
        `${name.padEnd(12)} vocab ${String(vocab).padStart(7)}: ours ${oursMs.toFixed(3)} ms/token, ` +
          `reference ${refMs.toFixed(3)} ms/token (${(refMs / oursMs).toFixed(1)}× faster)`,
      );
      results[`${name}_${vocab}_ms`] = round3(oursMs);
      results[`${name}_${vocab}_vs_reference`] = round3(oursMs / refMs);
    }
  }
  const exps = await SamplingExps.create();
  const BATCH_SETTINGS: [string, string, SamplingParams][] = [
    ["", "t 0.8", { ...base, temperature: 0.8, bias: new Map([[2, -100]]) }],
    ["top_p_", "top_p 0.9", { ...base, temperature: 0.7, topP: 0.9 }],
    ["top_k_top_p_", "top_k 50, top_p 0.95", { ...base, temperature: 0.7, topK: 50, topP: 0.95 }],
  ];
  for (const [key, label, p] of BATCH_SETTINGS)
    for (const vocab of VOCABS) {
      // 8 rows in one buffer, as a pass returns them.
      const step = new Float32Array(8 * vocab);
      for (let r = 0; r < 8; r++) step.set(modelLikeLogits(vocab, r + 2), r * vocab);
      const rows = Array.from({ length: 8 }, (_, r) => step.subarray(r * vocab, (r + 1) * vocab));
      const prngs = rows.map((_, r) => createPrng(r));
      const ctx = (r: number) => ({ prng: prngs[r], seen: [], banned: [], fallbackToken: 0 });
      const batched = async () => {
        const pre = await exps.compute(rows, new Array(8).fill(p.temperature), ranksFromExps(p));
        rows.forEach((l, r) => drawFromExps(l, pre[r], p, ctx(r)));
      };
      const perRow = () => rows.forEach((l, r) => sampleToken(l, p, ctx(r)));
      const a: number[] = [];
      const b: number[] = [];
      for (let round = 0; round < 7; round++) {
        let t = performance.now();
        for (let i = 0; i < 10; i++) await batched();
        a.push((performance.now() - t) / 10);
        t = performance.now();
        for (let i = 0; i < 10; i++) perRow();
        b.push((performance.now() - t) / 10);
      }
      const [oursMs, samplerMs] = [median(a.slice(1)), median(b.slice(1))];
      console.log(
        `8 rows, ${label} vocab ${String(vocab).padStart(7)}: exps session + draws ${oursMs.toFixed(3)} ms/step, ` +
          `sampleToken per row ${samplerMs.toFixed(3)} ms/step (${(samplerMs / oursMs).toFixed(1)}× faster)`,
      );
      results[`batch8_${key}${vocab}_ms`] = round3(oursMs);
      results[`batch8_${key}${vocab}_vs_sampler`] = round3(oursMs / samplerMs);
    }
  await exps.dispose();
  console.log(JSON.stringify({ bench: "sampler", ...results }));
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
function timed(f: () => void): number {
  const t = performance.now();
  f();
  return performance.now() - t;
}

function modelLikeLogits(vocab: number, seed: number): Float32Array {
  const prng = createPrng(seed);
  const l = Float32Array.from({ length: vocab }, () => {
    let g = 0;
    for (let k = 0; k < 6; k++) g += prng.next();
    return (g - 3) * 3.5;
  });
  for (let i = 0; i < 40; i++) l[Math.floor(prng.next() * vocab)] += 6 + prng.next() * 8;
  return l;
}

/** The sampler before the histogram: copy, bias, temperature, sort everything, Math.exp, truncate, draw. */
function referenceSample(raw: Float32Array, p: SamplingParams, u: number): number {
  const untouched = p.bias.size === 0 && (p.temperature === 0 || p.temperature === 1);
  const l = untouched ? raw : Float32Array.from(raw);
  if (!untouched) {
    for (const [id, b] of p.bias) if (id < l.length) l[id] = b <= -100 ? -Infinity : l[id] + b;
    if (p.temperature > 0 && p.temperature !== 1) for (let i = 0; i < l.length; i++) l[i] /= p.temperature;
  }
  const truncating = p.topK !== undefined || p.topP < 1;
  if (!truncating) {
    let max = -Infinity;
    for (let i = 0; i < l.length; i++) if (l[i] > max) max = l[i];
    const probs = new Float64Array(l.length);
    let total = 0;
    for (let i = 0; i < l.length; i++) total += probs[i] = Math.exp(l[i] - max);
    u *= total;
    for (let i = 0; i < probs.length; i++) if ((u -= probs[i]) < 0) return i;
    return l.length - 1;
  }
  return drawFrom(fullSortNucleus(l, p), u);
}

/** What logprobs cost before: a second exp pass over the vocabulary, then the top N. */
function referenceLogprobs(l: Float32Array, n: number): number {
  let max = -Infinity;
  for (let i = 0; i < l.length; i++) if (l[i] > max) max = l[i];
  let sum = 0;
  for (let i = 0; i < l.length; i++) sum += Math.exp(l[i] - max);
  const best: number[] = [];
  for (let i = 0; i < l.length; i++) {
    if (best.length < n || l[i] > l[best[best.length - 1]]) {
      best.push(i);
      best.sort((a, b) => l[b] - l[a] || a - b);
      if (best.length > n) best.pop();
    }
  }
  return max + Math.log(sum) + best.length;
}
