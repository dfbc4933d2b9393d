// GPT-2-style decoder graph with a KV cache, in the input/output naming of an HF ONNX export:
// inputs input_ids, attention_mask, [position_ids], past_key_values.N.key/value;
// outputs logits, present.N.key/value. Without position_ids (older GPT-2 exports), positions
// are the past length + 0..S-1, whatever the attention mask says.
import { FLOAT, GraphBuilder, INT64, type EncodedModel, type ExternalDataOptions } from "./onnx-builder";
import { Parts } from "./graph-parts";
import type { TinyWeights } from "./weights";

export interface TinyShape {
  vocabSize: number;
  nEmbd: number;
  nLayer: number;
  nHead: number;
  nPositions: number;
}

export interface Gpt2Layout {
  positions: "input" | "past-length";
}

export function buildGpt2Graph(
  shape: TinyShape,
  w: TinyWeights,
  layout: Gpt2Layout = { positions: "input" },
  external?: ExternalDataOptions,
): EncodedModel {
  const g = new GraphBuilder();
  const p = new Parts(g, "fp32");
  const { nEmbd: C, nHead: H, nLayer } = shape;
  const Dh = C / H;
  const kvShape = ["batch_size", H, "past_sequence_length", Dh];
  g.inputs.push(
    g.valueInfo("input_ids", INT64, ["batch_size", "sequence_length"]),
    g.valueInfo("attention_mask", INT64, ["batch_size", "total_sequence_length"]),
  );
  if (layout.positions === "input")
    g.inputs.push(g.valueInfo("position_ids", INT64, ["batch_size", "sequence_length"]));
  g.outputs.push(g.valueInfo("logits", FLOAT, ["batch_size", "sequence_length", shape.vocabSize]));
  for (let l = 0; l < nLayer; l++) {
    for (const kv of ["key", "value"]) {
      g.inputs.push(g.valueInfo(`past_key_values.${l}.${kv}`, FLOAT, kvShape));
      g.outputs.push(g.valueInfo(`present.${l}.${kv}`, FLOAT, ["batch_size", H, "total_sequence_length", Dh]));
    }
  }

  const bias = p.attentionBias();
  const positions = p.positions(layout.positions, "past_key_values.0.key");
  const headsShape = g.int64Tensor("heads_shape", [4], [0, 0, H, Dh]);
  const mergeShape = g.int64Tensor("merge_shape", [3], [0, 0, C]);
  const scale = g.scalarFloat(1 / Math.sqrt(Dh));
  const half = g.scalarFloat(0.5);
  const oneF = g.scalarFloat(1);
  const invSqrt2 = g.scalarFloat(Math.SQRT1_2);
  const layerNorm = (x: string, gamma: string, beta: string) =>
    g.op("LayerNormalization", [x, gamma, beta], { axis: -1, epsilon: 1e-5 });
  const param = (name: string, dims: number[], data: Float32Array) => g.floatTensor(name, dims, data);

  let x = g.op("Add", [
    g.op("Gather", [param("wte", [shape.vocabSize, C], w.wte), "input_ids"]),
    g.op("Gather", [param("wpe", [shape.nPositions, C], w.wpe), positions]),
  ]);
  for (let l = 0; l < nLayer; l++) {
    const lw = w.layers[l];
    const n = (s: string) => `h${l}.${s}`;
    const h = layerNorm(x, param(n("ln1.g"), [C], lw.ln1g), param(n("ln1.b"), [C], lw.ln1b));
    const split = (t: string) => g.op("Transpose", [g.op("Reshape", [t, headsShape])], { perm: [0, 2, 1, 3] });
    const q = split(p.linear(h, n("wq"), lw.wq, C, C, lw.bq));
    const k = split(p.linear(h, n("wk"), lw.wk, C, C, lw.bk));
    const v = split(p.linear(h, n("wv"), lw.wv, C, C, lw.bv));
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
    x = g.op("Add", [x, p.linear(attn, n("wo"), lw.wo, C, C, lw.bo)]);
    const h2 = layerNorm(x, param(n("ln2.g"), [C], lw.ln2g), param(n("ln2.b"), [C], lw.ln2b));
    const u = p.linear(h2, n("w1"), lw.w1, C, 4 * C, lw.b1);
    // GELU (erf form): 0.5 * u * (1 + erf(u / sqrt 2))
    const gelu = g.op("Mul", [g.op("Mul", [u, half]), g.op("Add", [oneF, g.op("Erf", [g.op("Mul", [u, invSqrt2])])])]);
    x = g.op("Add", [x, p.linear(gelu, n("w2"), lw.w2, 4 * C, C, lw.b2)]);
  }
  const final = layerNorm(x, param("lnf.g", [C], w.lnfg), param("lnf.b", [C], w.lnfb));
  p.linear(final, "lm_head", w.lmHead, C, shape.vocabSize, w.lmBias, "logits");
  return g.encode(17, { name: "tiny_gpt2", external });
}
