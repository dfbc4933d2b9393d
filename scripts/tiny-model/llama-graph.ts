// Llama-shaped decoder graph (RMSNorm, rotary positions, grouped KV heads, SwiGLU) in the layouts
// real exports use:
//   attention "standard": Optimum-style, explicit attention ops; position_ids input (or, with
//     positions "past-length", none: past length + 0..S-1); past/present concatenated.
//   attention "gqa": onnxruntime-genai's model-builder style, com.microsoft GroupQueryAttention
//     with rotary inside; no position_ids (the op derives them from seqlens_k = sum(mask) - 1).
// Optional inputs: num_logits_to_keep (logits of the last k positions only; 0 = all) and
// use_cache_branch (merged decoders: false = ignore the past inputs).
// hybrid: LFM2-style, as transformers.js feeds such models (model_type lfm2): even layers are
//   gated short convolutions whose state, the last CONV_L positions' inputs, is a cache entry
//   of fixed size (past_conv.N [batch, hidden, CONV_L] in, present_conv.N out); odd layers
//   are attention layers with past_key_values.N as usual.
import {
  BOOL,
  GraphBuilder,
  INT32,
  INT64,
  MS_DOMAIN,
  type EncodedModel,
  type ExternalDataOptions,
} from "./onnx-builder";
import { Parts, type WeightFormat } from "./graph-parts";
import { headDim, ropeTables, type LlamaLayerWeights, type LlamaShape, type LlamaWeights } from "./llama-weights";

export interface LlamaLayout {
  attention: "standard" | "gqa";
  positions: "input" | "past-length";
  numLogitsToKeep: boolean;
  useCacheBranch: boolean;
  hybrid: boolean;
}

export const STANDARD_LAYOUT: LlamaLayout = {
  attention: "standard",
  positions: "input",
  numLogitsToKeep: false,
  useCacheBranch: false,
  hybrid: false,
};

/** A hybrid model's convolution width (LFM2's conv_L_cache). */
export const CONV_L = 3;
/** Which layers of a hybrid model are convolutions (the others attention). */
export const isConvLayer = (layout: LlamaLayout, l: number) => layout.hybrid && l % 2 === 0;

export function buildLlamaGraph(
  s: LlamaShape,
  w: LlamaWeights,
  format: WeightFormat,
  layout: LlamaLayout,
  opts: { external?: ExternalDataOptions; q4Accuracy?: number } = {},
): EncodedModel {
  const g = new GraphBuilder();
  const p = new Parts(g, format, opts.q4Accuracy);
  const T = p.elem;
  const C = s.hidden;
  const D = headDim(s);
  const { heads: H, kvHeads: KVH } = s;
  const gqa = layout.attention === "gqa";
  const withPositionIds = !gqa && layout.positions === "input";

  g.inputs.push(
    g.valueInfo("input_ids", INT64, ["batch_size", "sequence_length"]),
    g.valueInfo("attention_mask", INT64, ["batch_size", "total_sequence_length"]),
  );
  if (withPositionIds) g.inputs.push(g.valueInfo("position_ids", INT64, ["batch_size", "sequence_length"]));
  const attentionLayers = [...Array(s.layers).keys()].filter((l) => !isConvLayer(layout, l));
  for (let l = 0; l < s.layers; l++) {
    if (isConvLayer(layout, l)) g.inputs.push(g.valueInfo(`past_conv.${l}`, T, ["batch_size", C, CONV_L]));
    else
      for (const kv of ["key", "value"])
        g.inputs.push(g.valueInfo(`past_key_values.${l}.${kv}`, T, ["batch_size", KVH, "past_sequence_length", D]));
  }
  if (layout.numLogitsToKeep) g.inputs.push(g.valueInfo("num_logits_to_keep", INT64, []));
  if (layout.useCacheBranch) g.inputs.push(g.valueInfo("use_cache_branch", BOOL, [1]));
  g.outputs.push(
    g.valueInfo("logits", T, ["batch_size", layout.numLogitsToKeep ? "logits_length" : "sequence_length", s.vocabSize]),
  );
  for (let l = 0; l < s.layers; l++) {
    if (isConvLayer(layout, l)) g.outputs.push(g.valueInfo(`present_conv.${l}`, T, ["batch_size", C, CONV_L]));
    else
      for (const kv of ["key", "value"])
        g.outputs.push(g.valueInfo(`present.${l}.${kv}`, T, ["batch_size", KVH, "total_sequence_length", D]));
  }

  const param = (name: string, dims: number[], data: Float32Array) => g.floatTensor(name, dims, data, T);
  const eps = g.scalarFloat(s.rmsEps, T);
  const rmsNorm = (x: string, name: string, gamma: Float32Array) => {
    const variance = g.op("ReduceMean", [g.op("Mul", [x, x])], { axes: [-1], keepdims: 1 });
    const normed = g.op("Mul", [x, g.op("Reciprocal", [g.op("Sqrt", [g.op("Add", [variance, eps])])])]);
    return g.op("Mul", [normed, param(name, [C], gamma)]);
  };

  // A merged decoder's past: all of it when use_cache_branch is true, none of it otherwise.
  const pastOf = (input: string) => {
    if (!layout.useCacheBranch) return input;
    const keep = g.op("Mul", [
      g.op("Cast", ["use_cache_branch"], { to: INT64 }),
      g.op("Shape", [input], { start: 2, end: 3 }),
    ]);
    return g.op("Slice", [input, g.int64Tensor(g.fresh("zero"), [1], [0]), keep, p.axes([2])]);
  };

  const { cos, sin } = ropeTables(s);
  let rope: ((t: string) => string) | null = null;
  let bias = "";
  let seqlensK = "";
  let totalLen = "";
  if (gqa) {
    // As the model builder does: seqlens_k = sum(attention_mask) - 1, total = mask width.
    const sum = g.op("ReduceSum", ["attention_mask", p.axes([1])], { keepdims: 0 });
    seqlensK = g.op("Cast", [g.op("Sub", [sum, g.int64Tensor("one_i64", [], [1])])], { to: INT32 });
    totalLen = g.op("Cast", [p.dim("attention_mask", 1)], { to: INT32 });
  } else {
    bias = p.attentionBias();
    const positions = p.positions(layout.positions, `past_key_values.${attentionLayers[0]}.key`);
    const doubled = (t: Float32Array) => {
      const half = D / 2;
      const out = new Float32Array(s.maxPositions * D);
      for (let q = 0; q < s.maxPositions; q++) {
        out.set(t.subarray(q * half, (q + 1) * half), q * D);
        out.set(t.subarray(q * half, (q + 1) * half), q * D + half);
      }
      return out;
    };
    const at = (table: Float32Array, name: string) =>
      g.op("Unsqueeze", [g.op("Gather", [param(name, [s.maxPositions, D], doubled(table)), positions]), p.axes([1])]);
    const cosP = at(cos, "rope.cos");
    const sinP = at(sin, "rope.sin");
    const [lo, mid, hi] = [0, D / 2, D].map((v) => g.int64Tensor(g.fresh("idx"), [1], [v]));
    const axis3 = p.axes([3]);
    rope = (t) => {
      const x1 = g.op("Slice", [t, lo, mid, axis3]);
      const x2 = g.op("Slice", [t, mid, hi, axis3]);
      const rotated = g.op("Concat", [g.op("Neg", [x2]), x1], { axis: 3 });
      return g.op("Add", [g.op("Mul", [t, cosP]), g.op("Mul", [rotated, sinP])]);
    };
  }
  const cosCache = gqa ? param("rope.cos_cache", [s.maxPositions, D / 2], cos) : "";
  const sinCache = gqa ? param("rope.sin_cache", [s.maxPositions, D / 2], sin) : "";

  const headsShape = (n: number) => g.int64Tensor(g.fresh("heads_shape"), [4], [0, 0, n, D]);
  const qShape = gqa ? "" : headsShape(H);
  const kvShape = gqa ? "" : headsShape(KVH);
  const mergeShape = gqa ? "" : g.int64Tensor("merge_shape", [3], [0, 0, H * D]);
  const grouped = KVH < H && !gqa;
  const repShape = grouped ? g.int64Tensor("rep_shape", [5], [1, 1, H / KVH, 1, 1]) : "";
  const allHeads = grouped ? g.int64Tensor("all_heads_shape", [4], [0, H, -1, D]) : "";
  const scale = gqa ? "" : g.scalarFloat(1 / Math.sqrt(D), T);
  const split = (t: string, shape: string) => g.op("Transpose", [g.op("Reshape", [t, shape])], { perm: [0, 2, 1, 3] });
  // Each KV head serves H / KVH query heads.
  const repeat = (t: string) =>
    !grouped ? t : g.op("Reshape", [g.op("Expand", [g.op("Unsqueeze", [t, p.axes([2])]), repShape]), allHeads]);

  // A gated short convolution over the last CONV_L positions (LFM2's): y = c * conv(b * x), the
  // state being the last CONV_L columns of conv's input. Written as shifted slices times the
  // kernel's columns (no Conv op, which onnxruntime's CPU kernels lack in float16).
  const convSliceAxis = layout.hybrid ? p.axes([2]) : "";
  const seqEnd = layout.hybrid ? g.int64Tensor("conv_end", [1], [2 ** 62]) : "";
  const at = (v: number) => g.int64Tensor(g.fresh("conv_at"), [1], [v]);
  const convBlock = (l: number, h: string, lw: LlamaLayerWeights) => {
    const n = (name: string) => `layers.${l}.conv.${name}`;
    const conv = lw.conv!;
    const b = p.linear(h, n("in_b"), lw.wq, C, C);
    const c = p.linear(h, n("in_c"), conv.wc, C, C);
    const xv = p.linear(h, n("in_x"), conv.wx, C, C);
    const bx = g.op("Transpose", [g.op("Mul", [b, xv])], { perm: [0, 2, 1] }); // [B, C, S]
    const seq = g.op("Concat", [`past_conv.${l}`, bx], { axis: 2 }); // [B, C, CONV_L + S]
    g.op("Slice", [seq, at(-CONV_L), seqEnd, convSliceAxis], {}, `present_conv.${l}`);
    let sum = "";
    for (let k = 0; k < CONV_L; k++) {
      // Columns 1 + k … S + k: position t's window is columns t + 1 … t + CONV_L.
      const end = k === CONV_L - 1 ? seqEnd : at(-(CONV_L - 1 - k));
      const column = new Float32Array(C).map((_, ch) => conv.kernel[ch * CONV_L + k]);
      const term = g.op("Mul", [
        g.op("Slice", [seq, at(1 + k), end, convSliceAxis]),
        param(n(`kernel.${k}`), [C, 1], column),
      ]);
      sum = k === 0 ? term : g.op("Add", [sum, term]);
    }
    const y = g.op("Mul", [c, g.op("Transpose", [sum], { perm: [0, 2, 1] })]);
    return p.linear(y, n("out_proj"), lw.wo, C, C);
  };

  const attentionBlock = (l: number, h: string, lw: LlamaLayerWeights) => {
    const n = (name: string) => `layers.${l}.${name}`;
    const q = p.linear(h, n("q_proj"), lw.wq, C, H * D);
    const k = p.linear(h, n("k_proj"), lw.wk, C, KVH * D);
    const v = p.linear(h, n("v_proj"), lw.wv, C, KVH * D);
    let attn: string;
    if (gqa) {
      [attn] = g.opMulti(
        "GroupQueryAttention",
        [
          q,
          k,
          v,
          pastOf(`past_key_values.${l}.key`),
          pastOf(`past_key_values.${l}.value`),
          seqlensK,
          totalLen,
          cosCache,
          sinCache,
        ],
        3,
        { num_heads: H, kv_num_heads: KVH, do_rotary: 1, scale: 1 / Math.sqrt(D) },
        [g.fresh("gqa"), `present.${l}.key`, `present.${l}.value`],
        MS_DOMAIN,
      );
    } else {
      const qh = rope!(split(q, qShape));
      const kh = rope!(split(k, kvShape));
      const kAll = g.op("Concat", [pastOf(`past_key_values.${l}.key`), kh], { axis: 2 }, `present.${l}.key`);
      const vAll = g.op(
        "Concat",
        [pastOf(`past_key_values.${l}.value`), split(v, kvShape)],
        { axis: 2 },
        `present.${l}.value`,
      );
      const kT = g.op("Transpose", [repeat(kAll)], { perm: [0, 1, 3, 2] });
      const scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [qh, kT]), scale]), bias]);
      const probs = g.op("Softmax", [scores], { axis: -1 });
      attn = g.op("Reshape", [
        g.op("Transpose", [g.op("MatMul", [probs, repeat(vAll)])], { perm: [0, 2, 1, 3] }),
        mergeShape,
      ]);
    }
    return p.linear(attn, n("o_proj"), lw.wo, H * D, C);
  };

  let x = g.op("Gather", [param("embed", [s.vocabSize, C], w.embed), "input_ids"]);
  for (let l = 0; l < s.layers; l++) {
    const lw = w.layers[l];
    const n = (name: string) => `layers.${l}.${name}`;
    const h = rmsNorm(x, n("attn_norm"), lw.attnNorm);
    x = g.op("Add", [x, isConvLayer(layout, l) ? convBlock(l, h, lw) : attentionBlock(l, h, lw)]);
    const h2 = rmsNorm(x, n("mlp_norm"), lw.mlpNorm);
    const gate = p.linear(h2, n("gate_proj"), lw.wg, C, s.ffn);
    const up = p.linear(h2, n("up_proj"), lw.wu, C, s.ffn);
    const act = g.op("Mul", [g.op("Mul", [gate, g.op("Sigmoid", [gate])]), up]);
    x = g.op("Add", [x, p.linear(act, n("down_proj"), lw.wd, s.ffn, C)]);
  }
  let final = rmsNorm(x, "final_norm", w.finalNorm);
  if (layout.numLogitsToKeep) {
    // Keep the last k positions (k = 0 keeps all): starts = -k along the sequence axis.
    const start = g.op("Unsqueeze", [g.op("Neg", ["num_logits_to_keep"]), p.axes([0])]);
    final = g.op("Slice", [final, start, g.int64Tensor("seq_end", [1], [2 ** 62]), p.axes([1])]);
  }
  p.linear(final, "lm_head", w.lmHead, C, s.vocabSize, undefined, "logits");
  return g.encode(17, { name: "tiny_llama", external: opts.external });
}
