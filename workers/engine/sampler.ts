// Our logits processing and sampling, in the fixed order documented in docs/sampling.md:
// logit_bias/bans → bad_words → repetition_penalty → temperature → [logprobs taken here]
// → top_k → tfs → top_p → draw with the sequence's seeded PRNG.
import type { Prng } from "./prng";

export interface SamplingParams {
  temperature: number;
  topP: number;
  topK?: number;
  tfs: number;
  repetitionPenalty: number;
  logprobs?: number;
  /** token id → additive bias; −100 (or less) bans the token. */
  bias: Map<number, number>;
}

export interface SampleContext {
  prng: Prng;
  /** Token ids already in the sequence (prompt + generated), for repetition_penalty. */
  seen: Iterable<number>;
  /** Token ids that must not be chosen at this step (bad_words). */
  banned: number[][];
  /** Chosen when every token is banned. */
  fallbackToken: number;
}

export interface TokenChoice {
  id: number;
  logprob: number;
}
/** `logprob` is NaN and `top` null unless the params ask for logprobs. */
export interface SampleResult extends TokenChoice {
  top: TokenChoice[] | null;
}

/**
 * Applies bias, bans, repetition penalty and temperature to a copy of the logits; when none
 * applies, returns `raw` itself (callers only read it): no vocabulary-sized copy per token.
 */
export function processLogits(raw: Float32Array, p: SamplingParams, ctx: SampleContext): Float32Array {
  const untouched =
    p.bias.size === 0 &&
    ctx.banned.every((list) => list.length === 0) &&
    p.repetitionPenalty === 1 &&
    (p.temperature === 0 || p.temperature === 1);
  if (untouched) return raw;
  const l = Float32Array.from(raw);
  for (const [id, b] of p.bias) if (id < l.length) l[id] = b <= -100 ? -Infinity : l[id] + b;
  for (const list of ctx.banned) for (const id of list) l[id] = -Infinity;
  if (p.repetitionPenalty !== 1) {
    // CTRL-style (as HF transformers, vLLM, TGI): divide positive logits, multiply negative ones.
    for (const id of new Set(ctx.seen)) {
      const v = l[id];
      if (v === -Infinity || id >= l.length) continue;
      l[id] = v > 0 ? v / p.repetitionPenalty : v * p.repetitionPenalty;
    }
  }
  if (p.temperature > 0 && p.temperature !== 1) for (let i = 0; i < l.length; i++) l[i] /= p.temperature;
  return l;
}

export function sampleToken(raw: Float32Array, p: SamplingParams, ctx: SampleContext): SampleResult {
  const l = processLogits(raw, p, ctx);
  let max = -Infinity;
  let argmax = -1;
  for (let i = 0; i < l.length; i++) {
    if (l[i] > max) {
      max = l[i];
      argmax = i;
    }
  }
  if (argmax < 0) return { id: ctx.fallbackToken, logprob: 0, top: null };
  const id = p.temperature === 0 ? argmax : draw(l, max, p, ctx.prng);
  // Log-probabilities cost a pass of exp() over the vocabulary: only when asked for.
  if (!p.logprobs) return { id, logprob: NaN, top: null };

  let sumExp = 0;
  for (let i = 0; i < l.length; i++) sumExp += Math.exp(l[i] - max);
  const logZ = max + Math.log(sumExp);
  const logprobOf = (t: number) => l[t] - logZ;
  const top = topN(l, p.logprobs).map((t) => ({ id: t, logprob: logprobOf(t) }));
  return { id, logprob: logprobOf(id), top };
}

function topN(l: Float32Array, n: number): number[] {
  const best: number[] = [];
  for (let i = 0; i < l.length; i++) {
    if (l[i] === -Infinity) continue;
    if (best.length < n || l[i] > l[best[best.length - 1]]) {
      best.push(i);
      best.sort((a, b) => l[b] - l[a] || a - b);
      if (best.length > n) best.pop();
    }
  }
  return best;
}

function draw(l: Float32Array, max: number, p: SamplingParams, prng: Prng): number {
  const truncating = (p.topK !== undefined && p.topK < l.length) || p.tfs < 1 || p.topP < 1;
  if (!truncating) {
    // No truncation: draw over the whole vocabulary without sorting.
    let total = 0;
    const probs = scratch(l.length);
    for (let i = 0; i < l.length; i++) total += probs[i] = Math.exp(l[i] - max);
    let u = prng.next() * total;
    let last = 0;
    for (let i = 0; i < probs.length; i++) {
      if (probs[i] === 0) continue;
      last = i;
      if ((u -= probs[i]) < 0) return i;
    }
    return last;
  }
  let ids = sortedCandidates(l);
  if (p.topK !== undefined) ids = ids.slice(0, p.topK);
  let probs = normalized(ids, l, max);
  if (p.tfs < 1) {
    ids = tailFree(ids, probs, p.tfs);
    probs = normalized(ids, l, max);
  }
  if (p.topP < 1) {
    let cum = 0;
    let keep = 0;
    while (keep < ids.length && (keep === 0 || cum < p.topP)) cum += probs[keep++];
    ids = ids.slice(0, keep);
    probs = normalized(ids, l, max);
  }
  let u = prng.next();
  for (let i = 0; i < ids.length; i++) if ((u -= probs[i]) < 0) return ids[i];
  return ids[ids.length - 1];
}

let scratchBuffer = new Float64Array(0);
/** A reused vocabulary-sized buffer (one per process: sampling is synchronous). */
function scratch(n: number): Float64Array {
  if (scratchBuffer.length < n) scratchBuffer = new Float64Array(n);
  return scratchBuffer.subarray(0, n);
}

/** Finite-logit token ids, most likely first (ties: lower id first, deterministic). */
function sortedCandidates(l: Float32Array): number[] {
  const ids: number[] = [];
  for (let i = 0; i < l.length; i++) if (l[i] !== -Infinity) ids.push(i);
  return ids.sort((a, b) => l[b] - l[a] || a - b);
}

function normalized(ids: number[], l: Float32Array, max: number): Float64Array {
  const probs = Float64Array.from(ids, (id) => Math.exp(l[id] - max));
  const total = probs.reduce((a, b) => a + b, 0);
  for (let i = 0; i < probs.length; i++) probs[i] /= total;
  return probs;
}

/**
 * Tail-free sampling (Phillips 2019; llama.cpp's formulation): normalize the absolute second
 * differences of the sorted probabilities and keep tokens until their cumulative sum exceeds z.
 */
function tailFree(ids: number[], probs: Float64Array, z: number): number[] {
  if (ids.length <= 2) return ids;
  const d2: number[] = [];
  for (let i = 0; i + 2 < probs.length; i++) {
    const d1a = probs[i] - probs[i + 1];
    const d1b = probs[i + 1] - probs[i + 2];
    d2.push(Math.abs(d1a - d1b));
  }
  const total = d2.reduce((a, b) => a + b, 0);
  if (total === 0) return ids;
  let cum = 0;
  for (let i = 0; i < d2.length; i++) {
    cum += d2[i] / total;
    if (cum > z && i >= 1) return ids.slice(0, i);
  }
  return ids;
}
