// Pieces both generated graph families share: linear layers in every weight format real exports
// ship, the attention bias from attention_mask, and the positions of the fed tokens.
import { quantizeBlocks, quantizeInt8, quantizeUint8 } from "./quantize";
import { BOOL, FLOAT, FLOAT16, GraphBuilder, INT8, MS_DOMAIN, UINT8 } from "./onnx-builder";

/** How a graph stores its weights: the dtypes of transformers.js' file names. */
export type WeightFormat = "fp32" | "fp16" | "q8" | "int8" | "uint8" | "q4" | "q4f16" | "q2" | "q2f16";

export const WEIGHT_FORMATS: readonly WeightFormat[] = [
  "fp32",
  "fp16",
  "q8",
  "int8",
  "uint8",
  "q4",
  "q4f16",
  "q2",
  "q2f16",
];

/** Activations (and the KV cache, logits) are float16 in fp16 exports, float32 otherwise. */
export const elemTypeOf = (f: WeightFormat) => (f === "fp16" || f === "q4f16" || f === "q2f16" ? FLOAT16 : FLOAT);

/** MatMulNBits' bits of a block-quantized format (0: not one). */
const nbitsOf = (f: WeightFormat) => (f === "q4" || f === "q4f16" ? 4 : f === "q2" || f === "q2f16" ? 2 : 0);

export class Parts {
  readonly elem: number;
  private readonly quantizedActivations = new Map<string, string[]>();
  constructor(
    readonly g: GraphBuilder,
    readonly format: WeightFormat,
    /** MatMulNBits accuracy_level (0 = unset: float compute; 4 = int8 compute). */
    private readonly q4Accuracy = 0,
  ) {
    this.elem = elemTypeOf(format);
  }

  /** x [.., K] · W [K, N] (+ bias), W in this graph's weight format. */
  linear(x: string, name: string, w: Float32Array, K: number, N: number, bias?: Float32Array, outName?: string) {
    const g = this.g;
    let y: string;
    if (this.format === "fp32" || this.format === "fp16") {
      y = g.op("MatMul", [x, g.floatTensor(name, [K, N], w, this.elem)]);
    } else if (nbitsOf(this.format)) {
      const bits = nbitsOf(this.format) as 2 | 4;
      const { packed, scales, blocks, blob } = quantizeBlocks(w, K, N, bits);
      const attrs: Record<string, number> = { K, N, bits, block_size: 32 };
      if (this.q4Accuracy) attrs.accuracy_level = this.q4Accuracy;
      y = g.op(
        "MatMulNBits",
        [
          x,
          g.initializer(`${name}.q${bits}`, UINT8, [N, blocks, blob], packed),
          g.floatTensor(`${name}.scales`, [N * blocks], scales, this.elem),
        ],
        attrs,
        undefined,
        MS_DOMAIN,
      );
    } else {
      // onnxruntime's dynamic quantization: uint8 activations quantized per call, 8-bit weights.
      // Like its quantize_dynamic, one DynamicQuantizeLinear per activation, shared by every
      // MatMulInteger that reads it (q/k/v, gate/up).
      let quantized = this.quantizedActivations.get(x);
      if (!quantized) {
        quantized = g.opMulti("DynamicQuantizeLinear", [x], 3);
        this.quantizedActivations.set(x, quantized);
      }
      const [xq, xs, xz] = quantized;
      let wq: string;
      let wz: string;
      let ws: number;
      if (this.format === "uint8") {
        const u = quantizeUint8(w);
        wq = g.initializer(`${name}.u8`, UINT8, [K, N], u.q);
        wz = g.initializer(`${name}.zp`, UINT8, [], Uint8Array.of(u.zeroPoint));
        ws = u.scale;
      } else {
        const s = quantizeInt8(w);
        wq = g.initializer(`${name}.i8`, INT8, [K, N], s.q);
        wz = g.initializer(`${name}.zp`, INT8, [], Int8Array.of(0));
        ws = s.scale;
      }
      const acc = g.op("Cast", [g.op("MatMulInteger", [xq, wq, xz, wz])], { to: FLOAT });
      y = g.op("Mul", [acc, g.op("Mul", [xs, g.scalarFloat(ws)])]);
    }
    if (bias) y = g.op("Add", [y, g.floatTensor(`${name}.bias`, [N], bias, this.elem)]);
    return outName ? g.op("Identity", [y], {}, outName) : y;
  }

  /**
   * Additive attention bias [B, 1, S, T]: query i (physical column past + i) sees key j when
   * j <= past + i and attention_mask[b, j] is 1. Positions are not assumed: only columns.
   */
  attentionBias(): string {
    const g = this.g;
    const seqLen = this.dim("input_ids", 1);
    const totalLen = this.dim("attention_mask", 1);
    const one = g.int64Tensor(g.fresh("one"), [], [1]);
    const zero = g.int64Tensor(g.fresh("zero"), [], [0]);
    const qPos = g.op("Unsqueeze", [g.op("Range", [g.op("Sub", [totalLen, seqLen]), totalLen, one]), this.axes([1])]);
    const kPos = g.op("Unsqueeze", [g.op("Range", [zero, totalLen, one]), this.axes([0])]);
    const causal = g.op("LessOrEqual", [kPos, qPos]);
    const notPad = g.op("Unsqueeze", [g.op("Cast", ["attention_mask"], { to: BOOL }), this.axes([1, 2])]);
    // float16's lowest finite value: exp() of it underflows to 0, and -inf + x never makes NaN.
    const neg = this.elem === FLOAT16 ? -65504 : -1e9;
    return g.op("Where", [g.op("And", [causal, notPad]), g.scalarFloat(0, this.elem), g.scalarFloat(neg, this.elem)]);
  }

  /**
   * Positions of the fed tokens: the `position_ids` input, or (exports without it, like GPT-2's
   * older ones) past length + 0..S-1 as a [1, S] tensor shared by every row.
   */
  positions(mode: "input" | "past-length", pastInput: string): string {
    if (mode === "input") return "position_ids";
    const g = this.g;
    const past = this.dim(pastInput, 2);
    const end = g.op("Add", [past, this.dim("input_ids", 1)]);
    return g.op("Unsqueeze", [g.op("Range", [past, end, g.int64Tensor(g.fresh("one"), [], [1])]), this.axes([0])]);
  }

  /** Dimension `axis` of `tensor` as an int64 scalar. */
  dim(tensor: string, axis: number): string {
    const g = this.g;
    return g.op("Squeeze", [g.op("Shape", [tensor], { start: axis, end: axis + 1 }), this.axes([0])]);
  }

  axes(values: number[]): string {
    return this.g.int64Tensor(this.g.fresh("axes"), [values.length], values);
  }
}
