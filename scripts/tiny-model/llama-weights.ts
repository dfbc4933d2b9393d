// Deterministic random weights for the llama-shaped graphs.
import type { Rng } from "./prng";
import { standardize } from "./weights";

export interface LlamaShape {
  vocabSize: number;
  hidden: number;
  layers: number;
  heads: number;
  kvHeads: number;
  ffn: number;
  maxPositions: number;
  ropeTheta: number;
  rmsEps: number;
}

export interface LlamaLayerWeights {
  attnNorm: Float32Array;
  wq: Float32Array;
  wk: Float32Array;
  wv: Float32Array;
  wo: Float32Array;
  mlpNorm: Float32Array;
  wg: Float32Array;
  wu: Float32Array;
  wd: Float32Array;
  /**
   * A hybrid model's convolution layer (../llama-graph.ts): wq and wo are its input and output
   * projections b and out, these the other two and the kernel [hidden, CONV_L]; wk and wv are empty.
   */
  conv?: { wc: Float32Array; wx: Float32Array; kernel: Float32Array };
}

export interface LlamaWeights {
  embed: Float32Array;
  layers: LlamaLayerWeights[];
  finalNorm: Float32Array;
  lmHead: Float32Array;
}

export const headDim = (s: LlamaShape) => s.hidden / s.heads;

const ones = (n: number) => new Float32Array(n).fill(1);
const normal = (rng: Rng, n: number, std: number) => {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = rng.gaussian() * std;
  return out;
};

/**
 * "mixing" (small test models): standardized embeddings and full-strength random blocks, so each
 * token depends on its position and the whole past: a cache or position bug changes the greedy
 * text within a few tokens. Logits have a standard deviation of about 4, so the best two tokens
 * are rarely within float16 rounding of each other.
 * "bench": small random weights (std 0.02), as a freshly initialised model.
 */
export type LlamaWeightStyle = "mixing" | "bench";

export function makeLlamaWeights(
  s: LlamaShape,
  rng: Rng,
  style: LlamaWeightStyle,
  conv?: { layers: (l: number) => boolean; width: number },
): LlamaWeights {
  const C = s.hidden;
  const D = headDim(s);
  const std = (fanIn: number) => (style === "bench" ? 0.02 : 1 / Math.sqrt(fanIn));
  const embed = normal(rng, s.vocabSize * C, style === "bench" ? 0.02 : 1);
  if (style === "mixing") for (let t = 0; t < s.vocabSize; t++) standardize(embed.subarray(t * C, (t + 1) * C));
  const layers: LlamaLayerWeights[] = [];
  for (let l = 0; l < s.layers; l++) {
    layers.push({
      attnNorm: ones(C),
      wq: normal(rng, C * s.heads * D, std(C)),
      wk: normal(rng, C * s.kvHeads * D, std(C)),
      wv: normal(rng, C * s.kvHeads * D, std(C)),
      wo: normal(rng, s.heads * D * C, std(s.heads * D)),
      mlpNorm: ones(C),
      wg: normal(rng, C * s.ffn, std(C)),
      wu: normal(rng, C * s.ffn, std(C)),
      wd: normal(rng, s.ffn * C, std(s.ffn)),
    });
  }
  // Drawn after every other layer weight, so the models without convolutions keep their weights.
  if (conv)
    for (const [l, lw] of layers.entries()) {
      if (!conv.layers(l)) continue;
      lw.wk = lw.wv = new Float32Array(0);
      lw.conv = {
        wc: normal(rng, C * C, std(C)),
        wx: normal(rng, C * C, std(C)),
        kernel: normal(rng, C * conv.width, style === "bench" ? 0.02 : 1 / Math.sqrt(conv.width)),
      };
    }
  const headStd = style === "bench" ? 0.02 : 4 / Math.sqrt(C);
  return { embed, layers, finalNorm: ones(C), lmHead: normal(rng, C * s.vocabSize, headStd) };
}

/** RoPE angle tables [positions, D/2] (rotate-half convention, as HF llama). */
export function ropeTables(s: LlamaShape): { cos: Float32Array; sin: Float32Array } {
  const half = headDim(s) / 2;
  const cos = new Float32Array(s.maxPositions * half);
  const sin = new Float32Array(s.maxPositions * half);
  for (let p = 0; p < s.maxPositions; p++) {
    for (let i = 0; i < half; i++) {
      const angle = p * s.ropeTheta ** (-(2 * i) / (2 * half));
      cos[p * half + i] = Math.cos(angle);
      sin[p * half + i] = Math.sin(angle);
    }
  }
  return { cos, sin };
}
