// The sampler's truncation as it was before the histogram (../sampler.ts): the whole vocabulary
// sorted with a comparator (ties: lower id first), Math.exp, top_k renormalized, then the smallest
// prefix reaching top_p. The test compares every draw with it; `npm run bench -- sampler` times it.
import type { SamplingParams } from "../sampler";

/** The tokens a top_k / top_p draw chooses from, most likely first, with their probabilities. */
export function fullSortNucleus(l: Float32Array, p: SamplingParams): { ids: number[]; probs: Float64Array } {
  let max = -Infinity;
  for (let i = 0; i < l.length; i++) if (l[i] > max) max = l[i];
  let ids: number[] = [];
  for (let i = 0; i < l.length; i++) if (l[i] !== -Infinity) ids.push(i);
  ids.sort((a, b) => l[b] - l[a] || a - b);
  const normalized = (xs: number[]) => {
    const probs = Float64Array.from(xs, (id) => Math.exp(l[id] - max));
    const total = probs.reduce((a, b) => a + b, 0);
    return probs.map((x) => x / total);
  };
  if (p.topK !== undefined) ids = ids.slice(0, p.topK);
  let probs = normalized(ids);
  if (p.topP < 1) {
    let cum = 0;
    let keep = 0;
    while (keep < ids.length && (keep === 0 || cum < p.topP)) cum += probs[keep++];
    ids = ids.slice(0, keep);
    probs = normalized(ids);
  }
  return { ids, probs };
}

/** The token a uniform draw `u` in [0, 1) picks from a nucleus. */
export function drawFrom({ ids, probs }: { ids: number[]; probs: Float64Array }, u: number): number {
  for (let i = 0; i < ids.length; i++) if ((u -= probs[i]) < 0) return ids[i];
  return ids[ids.length - 1];
}
