// Deterministic weights. Random blocks add a little context dependence; the output head is a
// least-squares fit of the corpus' bigram log-probabilities, so the residual stream (dominated
// by the token embedding) yields word-like text instead of uniform noise.
import type { TinyShape } from "./gpt2-graph";
import type { Rng } from "./prng";

export interface LayerWeights {
  ln1g: Float32Array;
  ln1b: Float32Array;
  ln2g: Float32Array;
  ln2b: Float32Array;
  wq: Float32Array;
  bq: Float32Array;
  wk: Float32Array;
  bk: Float32Array;
  wv: Float32Array;
  bv: Float32Array;
  wo: Float32Array;
  bo: Float32Array;
  w1: Float32Array;
  b1: Float32Array;
  w2: Float32Array;
  b2: Float32Array;
}
export interface TinyWeights {
  wte: Float32Array;
  wpe: Float32Array;
  layers: LayerWeights[];
  lnfg: Float32Array;
  lnfb: Float32Array;
  lmHead: Float32Array;
  lmBias: Float32Array;
}

const filled = (n: number, v: number) => new Float32Array(n).fill(v);
const normal = (rng: Rng, n: number, std: number) => Float32Array.from({ length: n }, () => rng.gaussian() * std);

export function makeWeights(
  shape: TinyShape,
  rng: Rng,
  bigram: { logits: Float64Array; bias: Float64Array },
): TinyWeights {
  const { vocabSize: V, nEmbd: C } = shape;
  const wte = normal(rng, V * C, 1);
  for (let t = 0; t < V; t++) standardize(wte.subarray(t * C, (t + 1) * C));
  const layers: LayerWeights[] = [];
  for (let l = 0; l < shape.nLayer; l++) {
    layers.push({
      ln1g: filled(C, 1),
      ln1b: filled(C, 0),
      ln2g: filled(C, 1),
      ln2b: filled(C, 0),
      wq: normal(rng, C * C, 1 / Math.sqrt(C)),
      bq: filled(C, 0),
      wk: normal(rng, C * C, 1 / Math.sqrt(C)),
      bk: filled(C, 0),
      wv: normal(rng, C * C, 1 / Math.sqrt(C)),
      bv: filled(C, 0),
      wo: normal(rng, C * C, 0.3 / Math.sqrt(C)),
      bo: filled(C, 0),
      w1: normal(rng, C * 4 * C, 1 / Math.sqrt(C)),
      b1: filled(4 * C, 0),
      w2: normal(rng, 4 * C * C, 0.3 / Math.sqrt(4 * C)),
      b2: filled(C, 0),
    });
  }
  return {
    wte,
    wpe: normal(rng, shape.nPositions * C, 0.05),
    layers,
    lnfg: filled(C, 1),
    lnfb: filled(C, 0),
    lmHead: fitHead(wte, V, C, bigram.logits),
    lmBias: Float32Array.from(bigram.bias),
  };
}

export function standardize(row: Float32Array) {
  let mean = 0;
  for (const v of row) mean += v;
  mean /= row.length;
  let variance = 0;
  for (const v of row) variance += (v - mean) ** 2;
  const inv = 1 / Math.sqrt(variance / row.length + 1e-5);
  for (let i = 0; i < row.length; i++) row[i] = (row[i] - mean) * inv;
}

/** Solves (EᵀE + λI) W = Eᵀ L for W [C,V] by Cholesky; E [V,C], L [V,V]. */
function fitHead(E: Float32Array, V: number, C: number, L: Float64Array): Float32Array {
  const A = new Float64Array(C * C);
  for (let t = 0; t < V; t++) {
    const e = E.subarray(t * C, (t + 1) * C);
    for (let i = 0; i < C; i++) for (let j = 0; j <= i; j++) A[i * C + j] += e[i] * e[j];
  }
  for (let i = 0; i < C; i++) A[i * C + i] += 1e-3 * V;
  // Cholesky: A = R Rᵀ, lower triangle in place.
  for (let j = 0; j < C; j++) {
    let s = A[j * C + j];
    for (let k = 0; k < j; k++) s -= A[j * C + k] ** 2;
    A[j * C + j] = Math.sqrt(s);
    for (let i = j + 1; i < C; i++) {
      let t = A[i * C + j];
      for (let k = 0; k < j; k++) t -= A[i * C + k] * A[j * C + k];
      A[i * C + j] = t / A[j * C + j];
    }
  }
  const B = new Float64Array(C * V); // Eᵀ L
  for (let t = 0; t < V; t++) {
    const e = E.subarray(t * C, (t + 1) * C);
    const row = L.subarray(t * V, (t + 1) * V);
    for (let i = 0; i < C; i++) {
      const ei = e[i];
      const out = B.subarray(i * V, (i + 1) * V);
      for (let j = 0; j < V; j++) out[j] += ei * row[j];
    }
  }
  const W = new Float32Array(C * V);
  const y = new Float64Array(C);
  for (let col = 0; col < V; col++) {
    for (let i = 0; i < C; i++) {
      let s = B[i * V + col];
      for (let k = 0; k < i; k++) s -= A[i * C + k] * y[k];
      y[i] = s / A[i * C + i];
    }
    for (let i = C - 1; i >= 0; i--) {
      let s = y[i];
      for (let k = i + 1; k < C; k++) s -= A[k * C + i] * W[k * V + col];
      W[i * V + col] = s / A[i * C + i];
    }
  }
  return W;
}

/**
 * Log bigram probabilities (add-α smoothing) over token ids, split into a per-token output bias
 * (log unigram; tokens never seen get a large negative one) and row-centred residual logits.
 */
export function bigramLogits(
  sequences: number[][],
  V: number,
  alpha = 0.01,
): { logits: Float64Array; bias: Float64Array } {
  const counts = new Float64Array(V * V);
  const unigram = new Float64Array(V).fill(alpha);
  for (const seq of sequences) {
    for (let i = 0; i + 1 < seq.length; i++) {
      counts[seq[i] * V + seq[i + 1]] += 1;
      unigram[seq[i + 1]] += 1;
    }
  }
  const L = new Float64Array(V * V);
  const uniTotal = unigram.reduce((a, b) => a + b, 0);
  for (let t = 0; t < V; t++) {
    const row = counts.subarray(t * V, (t + 1) * V);
    const total = row.reduce((a, b) => a + b, 0);
    let mean = 0;
    for (let j = 0; j < V; j++) {
      const p = total > 0 ? (row[j] + alpha) / (total + alpha * V) : unigram[j] / uniTotal;
      L[t * V + j] = Math.log(p);
      mean += L[t * V + j];
    }
    mean /= V;
    for (let j = 0; j < V; j++) L[t * V + j] -= mean;
  }
  const bias = Float64Array.from(unigram, (u) => (u > alpha ? Math.log(u / uniTotal) : -12));
  const biasMean = bias.reduce((a, b) => a + b, 0) / V;
  for (let j = 0; j < V; j++) bias[j] -= biasMean;
  // Unseen tokens are handled by the bias alone; the head fits what the bias leaves over.
  for (let t = 0; t < V; t++)
    for (let j = 0; j < V; j++) L[t * V + j] = unigram[j] > alpha ? L[t * V + j] - bias[j] : 0;
  return { logits: L, bias };
}
