// onnxruntime's dynamic 8-bit quantization applied to an existing fp32 graph, the way
// transformers.js' scripts/quantize.py writes a repo's model_quantized.onnx (q8), model_int8.onnx
// and model_uint8.onnx: ONNXQuantizer in IntegerOps mode, not static, per tensor, with
// MatMulConstBOnly. So a third-party export (../shared/models/tiny-random-llama) can be tested in
// the dtype `auto` picks first, with the graph around the products as its exporter wrote it.
//  - Each MatMul whose B is a float initializer becomes DynamicQuantizeLinear (one per activation,
//    shared by every product that reads it) → MatMulInteger → Cast → Mul by the product of the two
//    scales. Products of two activations (attention) stay float.
//  - A Gather from a float initializer (the token embeddings) gathers from its uint8 copy (the
//    activation type) and a DequantizeLinear follows.
//  - Weights: q8 takes uint8 when the graph has Conv, GroupQueryAttention or MultiHeadAttention
//    (quantize.py's QUINT8_OPS), int8 otherwise; int8 is symmetric (zero point 0), uint8
//    asymmetric over [min(w, 0), max(w, 0)] (./quantize.ts); per tensor, or with `perChannel`
//    per column (one scale and zero point per output feature, quantize.py's --per_channel).
// Initializers must be inside the graph file (the test checkpoints' are); subgraphs are not
// visited (no test graph has one).
import onnxProto from "onnx-proto";
import { FLOAT, INT8, UINT8 } from "./onnx-builder";
import { quantizeInt8, quantizeUint8 } from "./quantize";

const { onnx } = onnxProto;
type NodeProto = InstanceType<typeof onnx.NodeProto>;
type TensorProto = InstanceType<typeof onnx.TensorProto>;
type GraphProto = InstanceType<typeof onnx.GraphProto>;

export type DynamicQuantMode = "q8" | "int8" | "uint8";

/** quantize.py's rule for q8's weight type (QUINT8_OPS). */
const UINT8_WEIGHT_OPS = new Set(["Conv", "GroupQueryAttention", "MultiHeadAttention"]);

/** The float values of an initializer stored inside the graph file. */
function floats(t: TensorProto): Float32Array {
  if (t.floatData?.length) return Float32Array.from(t.floatData);
  if (!t.rawData?.length) throw new Error(`initializer ${t.name} has no data in the graph file`);
  const raw = t.rawData;
  return new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength));
}

const bytes = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

const node = (opType: string, input: string[], output: string[], name: string, to?: number): NodeProto =>
  onnx.NodeProto.create({
    opType,
    input,
    output,
    name,
    attribute: to === undefined ? [] : [onnx.AttributeProto.create({ name: "to", type: 2, i: to })],
  });

/** The model (an encoded ModelProto) with its MatMul and Gather weights quantized (see above). */
export function quantizeDynamic(model: Uint8Array, mode: DynamicQuantMode, perChannel = false): Uint8Array {
  const m = onnx.ModelProto.decode(model);
  const g = m.graph as GraphProto;
  const graphNodes = g.node as NodeProto[];
  const initializers = new Map((g.initializer as TensorProto[]).map((t) => [t.name, t]));
  const floatInit = (name: string | undefined) => {
    const t = name ? initializers.get(name) : undefined;
    return t && t.dataType === FLOAT ? t : undefined;
  };
  const uint8Weights = mode === "uint8" || (mode === "q8" && graphNodes.some((n) => UINT8_WEIGHT_OPS.has(n.opType)));
  const added: TensorProto[] = [];
  const addInit = (name: string, dataType: number, dims: number[], data: ArrayBufferView) => {
    added.push(onnx.TensorProto.create({ name, dataType, dims, rawData: bytes(data) }));
    return name;
  };
  /**
   * A float initializer quantized once per way: [quantized, scale, zero point] names. Per tensor,
   * or with `columns` one scale and zero point per column of a [K, N] matrix (quantize.py's
   * --per_channel). A tied weight (the embeddings a Gather reads as uint8, also the head's int8
   * MatMul weight) gets one copy per way; the first keeps the plain names.
   */
  const quantized = new Map<string, [string, string, string]>();
  const quantizedNames = new Set<string>();
  const quantizeInit = (t: TensorProto, unsigned: boolean, columns = false) => {
    const way = `${unsigned ? "uint8" : "int8"}${columns ? "_per_column" : ""}`;
    let q = quantized.get(`${t.name}|${way}`);
    if (!q) {
      const name = quantizedNames.has(t.name) ? `${t.name}_${way}` : t.name;
      quantizedNames.add(t.name);
      const dims = (t.dims ?? []).map(Number);
      const w = floats(t);
      const [K, N] = columns ? dims : [1, w.length];
      const values = unsigned ? new Uint8Array(w.length) : new Int8Array(w.length);
      const scales = new Float32Array(columns ? N : 1);
      const zeroPoints = unsigned ? new Uint8Array(scales.length) : new Int8Array(scales.length);
      for (let c = 0; c < scales.length; c++) {
        // Column c of [K, N] (or the whole tensor), quantized and put back in place.
        const at = (k: number) => (columns ? k * N + c : k);
        const part = Float32Array.from({ length: columns ? K : w.length }, (_, k) => w[at(k)]);
        const r = unsigned ? quantizeUint8(part) : { ...quantizeInt8(part), zeroPoint: 0 };
        r.q.forEach((v, k) => (values[at(k)] = v));
        scales[c] = r.scale;
        zeroPoints[c] = r.zeroPoint;
      }
      const paramDims = columns ? [N] : [];
      q = [
        addInit(`${name}_quantized`, unsigned ? UINT8 : INT8, dims, values),
        addInit(`${name}_scale`, FLOAT, paramDims, scales),
        addInit(`${name}_zero_point`, unsigned ? UINT8 : INT8, paramDims, zeroPoints),
      ];
      quantized.set(`${t.name}|${way}`, q);
    }
    return q;
  };
  /** Activation → its DynamicQuantizeLinear outputs (one quantizer per activation). */
  const activations = new Map<string, [string, string, string]>();
  const nodes: NodeProto[] = [];
  for (const n of graphNodes) {
    const isDefault = !n.domain || n.domain === "ai.onnx";
    const weight = floatInit(n.input[1]);
    if (isDefault && n.opType === "MatMul" && weight && weight.dims?.length === 2) {
      const x = n.input[0];
      let xq = activations.get(x);
      if (!xq) {
        xq = [`${x}_quantized`, `${x}_scale`, `${x}_zero_point`];
        nodes.push(node("DynamicQuantizeLinear", [x], xq, `${x}_QuantizeLinear`));
        activations.set(x, xq);
      }
      const [wq, ws, wz] = quantizeInit(weight, uint8Weights, perChannel);
      const y = n.output[0];
      const product = `${y}_output_quantized`;
      nodes.push(
        node("MatMulInteger", [xq[0], wq, xq[2], wz], [product], `${n.name}_quant`),
        node("Cast", [product], [`${product}_cast_output`], `${product}_cast`, FLOAT),
        node("Mul", [xq[1], ws], [`${n.name}_quant_scales_mul:0`], `${n.name}_quant_scales_mul`),
        node(
          "Mul",
          [`${product}_cast_output`, `${n.name}_quant_scales_mul:0`],
          [y],
          `${n.name}_quant_output_scale_mul`,
        ),
      );
      continue;
    }
    const table = floatInit(n.input[0]);
    if (isDefault && n.opType === "Gather" && table) {
      // quantize_activation on an initializer: the activation type, uint8.
      const [tq, ts, tz] = quantizeInit(table, true);
      const y = n.output[0];
      nodes.push(
        node("Gather", [tq, n.input[1]], [`${y}_quantized`], n.name),
        node("DequantizeLinear", [`${y}_quantized`, ts, tz], [y], `${y}_DequantizeLinear`),
      );
      const axis = n.attribute.find((a) => a.name === "axis");
      if (axis) nodes.at(-2)!.attribute = [axis];
      continue;
    }
    nodes.push(n);
  }
  const read = new Set(nodes.flatMap((n) => n.input));
  g.node = nodes;
  g.initializer = [
    ...(g.initializer as TensorProto[]).filter((t) => read.has(t.name) || !quantizedNames.has(t.name)),
    ...added,
  ];
  return onnx.ModelProto.encode(m).finish();
}
