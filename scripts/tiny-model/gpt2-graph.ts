// GPT-2-style decoder graph with a KV cache, in the input/output naming of an HF ONNX export:
// inputs input_ids, attention_mask, position_ids, past_key_values.N.key/value;
// outputs logits, present.N.key/value.
import { BOOL, FLOAT, GraphBuilder, INT64 } from "./onnx-builder";
import type { TinyWeights } from "./weights";

export interface TinyShape {
  vocabSize: number;
  nEmbd: number;
  nLayer: number;
  nHead: number;
  nPositions: number;
}

export function buildGpt2Graph(shape: TinyShape, w: TinyWeights): Uint8Array {
  const g = new GraphBuilder();
  const { nEmbd: C, nHead: H, nLayer } = shape;
  const Dh = C / H;
  const kvShape = ["batch_size", H, "past_sequence_length", Dh];
  g.inputs.push(
    g.valueInfo("input_ids", INT64, ["batch_size", "sequence_length"]),
    g.valueInfo("attention_mask", INT64, ["batch_size", "total_sequence_length"]),
    g.valueInfo("position_ids", INT64, ["batch_size", "sequence_length"]),
  );
  g.outputs.push(g.valueInfo("logits", FLOAT, ["batch_size", "sequence_length", shape.vocabSize]));
  for (let l = 0; l < nLayer; l++) {
    for (const kv of ["key", "value"]) {
      g.inputs.push(g.valueInfo(`past_key_values.${l}.${kv}`, FLOAT, kvShape));
      g.outputs.push(g.valueInfo(`present.${l}.${kv}`, FLOAT, ["batch_size", H, "total_sequence_length", Dh]));
      // Extra: only this pass's new keys/values. Engines that keep their own cache fetch these
      // instead of the whole `present` (HF loaders ignore outputs they do not know).
      g.outputs.push(g.valueInfo(`kv_delta.${l}.${kv}`, FLOAT, ["batch_size", H, "sequence_length", Dh]));
    }
  }

  // Additive attention bias [B,1,T,total]: causal (query i sees keys <= past+i) AND not padding.
  const zeroAxis = g.int64Tensor("axis0", [1], [0]);
  const oneAxis = g.int64Tensor("axis1", [1], [1]);
  const padAxes = g.int64Tensor("axes12", [2], [1, 2]);
  const one = g.int64Tensor("one", [], [1]);
  const zero = g.int64Tensor("zero", [], [0]);
  const seqLen = g.op("Squeeze", [g.op("Shape", ["input_ids"], { start: 1, end: 2 }), zeroAxis]);
  const totalLen = g.op("Squeeze", [g.op("Shape", ["attention_mask"], { start: 1, end: 2 }), zeroAxis]);
  const pastLen = g.op("Sub", [totalLen, seqLen]);
  const qPos = g.op("Unsqueeze", [g.op("Range", [pastLen, totalLen, one]), oneAxis]);
  const kPos = g.op("Unsqueeze", [g.op("Range", [zero, totalLen, one]), zeroAxis]);
  const causal = g.op("LessOrEqual", [kPos, qPos]);
  const notPad = g.op("Unsqueeze", [g.op("Cast", ["attention_mask"], { to: BOOL }), padAxes]);
  const allowed = g.op("And", [causal, notPad]);
  const bias = g.op("Where", [allowed, g.scalarFloat(0), g.scalarFloat(-1e9)]);

  const headsShape = g.int64Tensor("heads_shape", [4], [0, 0, H, Dh]);
  const mergeShape = g.int64Tensor("merge_shape", [3], [0, 0, C]);
  const scale = g.scalarFloat(1 / Math.sqrt(Dh));
  const half = g.scalarFloat(0.5);
  const oneF = g.scalarFloat(1);
  const invSqrt2 = g.scalarFloat(Math.SQRT1_2);
  const layerNorm = (x: string, gamma: string, beta: string) =>
    g.op("LayerNormalization", [x, gamma, beta], { axis: -1, epsilon: 1e-5 });
  const linear = (x: string, weight: string, b: string) => g.op("Add", [g.op("MatMul", [x, weight]), b]);
  const param = (name: string, dims: number[], data: Float32Array) => g.floatTensor(name, dims, data);

  let x = g.op("Add", [
    g.op("Gather", [param("wte", [shape.vocabSize, C], w.wte), "input_ids"]),
    g.op("Gather", [param("wpe", [shape.nPositions, C], w.wpe), "position_ids"]),
  ]);
  for (let l = 0; l < nLayer; l++) {
    const lw = w.layers[l];
    const p = (n: string) => `h${l}.${n}`;
    const h = layerNorm(x, param(p("ln1.g"), [C], lw.ln1g), param(p("ln1.b"), [C], lw.ln1b));
    const split = (t: string) => g.op("Transpose", [g.op("Reshape", [t, headsShape])], { perm: [0, 2, 1, 3] });
    const q = split(linear(h, param(p("wq"), [C, C], lw.wq), param(p("bq"), [C], lw.bq)));
    const k = split(linear(h, param(p("wk"), [C, C], lw.wk), param(p("bk"), [C], lw.bk)));
    const v = split(linear(h, param(p("wv"), [C, C], lw.wv), param(p("bv"), [C], lw.bv)));
    g.op("Identity", [k], {}, `kv_delta.${l}.key`);
    g.op("Identity", [v], {}, `kv_delta.${l}.value`);
    const kAll = g.op("Concat", [`past_key_values.${l}.key`, k], { axis: 2 }, `present.${l}.key`);
    const vAll = g.op("Concat", [`past_key_values.${l}.value`, v], { axis: 2 }, `present.${l}.value`);
    const scores = g.op("Add", [
      g.op("Mul", [g.op("MatMul", [q, g.op("Transpose", [kAll], { perm: [0, 1, 3, 2] })]), scale]),
      bias,
    ]);
    const probs = g.op("Softmax", [scores], { axis: -1 });
    const attn = g.op("Reshape", [
      g.op("Transpose", [g.op("MatMul", [probs, vAll])], { perm: [0, 2, 1, 3] }),
      mergeShape,
    ]);
    x = g.op("Add", [x, linear(attn, param(p("wo"), [C, C], lw.wo), param(p("bo"), [C], lw.bo))]);
    const h2 = layerNorm(x, param(p("ln2.g"), [C], lw.ln2g), param(p("ln2.b"), [C], lw.ln2b));
    const u = linear(h2, param(p("w1"), [C, 4 * C], lw.w1), param(p("b1"), [4 * C], lw.b1));
    // GELU (erf form): 0.5 * u * (1 + erf(u / sqrt 2))
    const gelu = g.op("Mul", [g.op("Mul", [u, half]), g.op("Add", [oneF, g.op("Erf", [g.op("Mul", [u, invSqrt2])])])]);
    x = g.op("Add", [x, linear(gelu, param(p("w2"), [4 * C, C], lw.w2), param(p("b2"), [C], lw.b2))]);
  }
  const final = layerNorm(x, param("lnf.g", [C], w.lnfg), param("lnf.b", [C], w.lnfb));
  g.op(
    "Add",
    [
      g.op("MatMul", [final, param("lm_head", [C, shape.vocabSize], w.lmHead)]),
      param("lm_bias", [shape.vocabSize], w.lmBias),
    ],
    {},
    "logits",
  );
  return g.encode(17);
}
