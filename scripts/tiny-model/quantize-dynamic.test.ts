// The test quantizer (quantize-dynamic.ts) on a weight that two kinds of node read: a Gather takes
// it as uint8 (the activation type) and a MatMul as int8 (int8 mode's weights). Each must get its
// own copy, quantized its own way, and the graph must still compute what the float one does.
import * as ort from "onnxruntime-node";
import onnxProto from "onnx-proto";
import { describe, expect, it } from "vitest";
import { quantizeDynamic } from "./quantize-dynamic";

const { onnx } = onnxProto;
const { FLOAT, INT64, INT8, UINT8 } = onnx.TensorProto.DataType;

/** ids → Gather(W) = rows; x · W = product; W [4, 4] shared by both. */
function tiedGraph(w: Float32Array): Uint8Array {
  const info = (name: string, type: number, dims: number[]) =>
    onnx.ValueInfoProto.create({
      name,
      type: { tensorType: { elemType: type, shape: { dim: dims.map((d) => ({ dimValue: d })) } } },
    });
  const graph = onnx.GraphProto.create({
    name: "tied",
    node: [
      onnx.NodeProto.create({ opType: "Gather", input: ["W", "ids"], output: ["rows"], name: "gather" }),
      onnx.NodeProto.create({ opType: "MatMul", input: ["x", "W"], output: ["product"], name: "matmul" }),
    ],
    initializer: [onnx.TensorProto.create({ name: "W", dataType: FLOAT, dims: [4, 4], floatData: Array.from(w) })],
    input: [info("ids", INT64, [2]), info("x", FLOAT, [1, 4])],
    output: [info("rows", FLOAT, [2, 4]), info("product", FLOAT, [1, 4])],
  });
  return onnx.ModelProto.encode(
    onnx.ModelProto.create({ irVersion: 8, opsetImport: [{ domain: "", version: 17 }], graph }),
  ).finish();
}

describe("quantizeDynamic", () => {
  it("quantizes a weight read by a Gather and by a MatMul once for each, as each reads it", async () => {
    const w = Float32Array.from({ length: 16 }, (_, i) => Math.sin(i * 1.7) * (i % 3 === 0 ? 2 : 0.5));
    const quantized = quantizeDynamic(tiedGraph(w), "int8");
    const g = onnx.ModelProto.decode(quantized).graph!;
    const typeOf = (name: string) => g.initializer!.find((t) => t.name === name)?.dataType;
    const gather = g.node!.find((n) => n.opType === "Gather")!;
    const product = g.node!.find((n) => n.opType === "MatMulInteger")!;
    expect(typeOf(gather.input![0])).toBe(UINT8);
    expect(typeOf(product.input![1])).toBe(INT8);
    expect(gather.input![0]).not.toBe(product.input![1]);
    expect(g.initializer!.some((t) => t.name === "W")).toBe(false);

    // And it computes the float graph's numbers within 8-bit steps.
    const run = async (model: Uint8Array) => {
      const s = await ort.InferenceSession.create(model);
      const out = await s.run({
        ids: new ort.Tensor("int64", BigInt64Array.from([3n, 1n]), [2]),
        x: new ort.Tensor("float32", Float32Array.from([0.3, -1.2, 0.8, 0.05]), [1, 4]),
      });
      await s.release();
      return { rows: Array.from(out.rows.data as Float32Array), product: Array.from(out.product.data as Float32Array) };
    };
    const [exact, approx] = [await run(tiedGraph(w)), await run(quantized)];
    const step = 4 / 255; // |W| ≤ 2: one uint8 step of the table, about one int8 step of the weight
    exact.rows.forEach((v, i) => expect(Math.abs(approx.rows[i] - v)).toBeLessThanOrEqual(step));
    exact.product.forEach((v, i) => expect(Math.abs(approx.product[i] - v)).toBeLessThan(0.1));
  });
});
