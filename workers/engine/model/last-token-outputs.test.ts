// The graph's extra last-token outputs (last-token-outputs.ts): the same numbers as the last
// column of the full present, weights still read from the model file, and a graph that cannot
// take them loaded unchanged.
import { statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { llamaDtypesDir, llamaLayoutDir } from "../testing/models";
import { lastTokenOutput } from "./graph-signature";
import { modelWithWeightsByReference, presentsToSlice } from "./last-token-outputs";
import { scanOnnxOps } from "./onnx-scan";
import { createGraphSession, int64Tensor, kvTensor, newKvArray, type OrtTensor } from "./session";

/** One pass of 3 rows × 1 new token over `past` columns (with `slice`'s last-token outputs), fetching `outputs`. */
async function pass(file: string, slice: string[], outputs: string[]) {
  const s = await createGraphSession(file, {}, slice);
  const inputs = new Map(s.inputs.map((i) => [i.name, i]));
  const [B, past] = [3, 5];
  const kvMeta = inputs.get("past_key_values.0.key")!;
  const [, heads, , D] = kvMeta.shape as number[];
  const type = kvMeta.type as "float32" | "float16";
  const feeds: Record<string, OrtTensor> = {
    input_ids: int64Tensor([5, 9, 11], [B, 1]),
    attention_mask: int64Tensor(new Array(B * (past + 1)).fill(1), [B, past + 1]),
    position_ids: int64Tensor([past, past, past], [B, 1]),
  };
  for (const i of s.inputs.filter((i) => i.name.startsWith("past_key_values."))) {
    const data = newKvArray(type, B * heads * past * D);
    // Distinct finite values per entry, so a mixed-up output would show.
    for (let k = 0; k < data.length; k++) data[k] = type === "float32" ? Math.sin(k + i.name.length) : 0x3c00;
    feeds[i.name] = kvTensor(type, data, [B, heads, past, D]);
  }
  const fetches = Object.fromEntries(["logits", ...outputs].map((name) => [name, null]));
  const result = await s.run(feeds, fetches);
  const outputNames = s.outputs.map((o) => o.name);
  await s.dispose();
  return { result, outputNames, heads, D, B, past };
}

describe("last-token outputs", () => {
  it("equal the last position of each present, for every entry", async () => {
    const file = path.join(await llamaDtypesDir(), "onnx/model.onnx");
    const presents = presentsToSlice(scanOnnxOps(file));
    expect(presents.length).toBeGreaterThan(1);
    const full = await pass(file, [], presents);
    const sliced = await pass(file, presents, presents.map(lastTokenOutput));
    expect(sliced.outputNames).toEqual(expect.arrayContaining(presents.map(lastTokenOutput)));
    const { heads, D, B, past } = full;
    for (const p of presents) {
      const whole = full.result[p].data as Float32Array;
      const last = sliced.result[lastTokenOutput(p)];
      expect(last.dims).toEqual([B, heads, 1, D]);
      const expected: number[] = [];
      for (let bh = 0; bh < B * heads; bh++)
        expected.push(...whole.subarray((bh * (past + 1) + past) * D, (bh * (past + 1) + past + 1) * D));
      expect(Array.from(last.data as Float32Array)).toEqual(expected);
    }
    expect(Array.from(sliced.result.logits.data as Float32Array)).toEqual(
      Array.from(full.result.logits.data as Float32Array),
    );
  });

  it("hand onnxruntime the graph with its weights referenced into the file, not copied", async () => {
    const file = path.join(await llamaDtypesDir(), "onnx/model.onnx");
    const bytes = modelWithWeightsByReference(file);
    expect(bytes.length).toBeLessThan(statSync(file).size / 20);
    // Weights already in external data files stay references to those files.
    const external = path.join(await llamaLayoutDir("external-data"), "onnx/model.onnx");
    expect(modelWithWeightsByReference(external).toString("latin1")).toContain("model.onnx_data");
  });

  it("are left to graphs the padded layout serves", async () => {
    const dtypes = await llamaDtypesDir();
    expect(presentsToSlice(scanOnnxOps(path.join(dtypes, "onnx/model_q4.onnx"))).length).toBeGreaterThan(0);
    // Per-tensor activation quantization, positions from the past length, GroupQueryAttention: none.
    expect(presentsToSlice(scanOnnxOps(path.join(dtypes, "onnx/model_quantized.onnx")))).toEqual([]);
    expect(presentsToSlice(scanOnnxOps(path.join(await llamaLayoutDir("no-position-ids"), "onnx/model.onnx")))).toEqual(
      [],
    );
    expect(presentsToSlice(scanOnnxOps(path.join(await llamaLayoutDir("gqa"), "onnx/model.onnx")))).toEqual([]);
  });

  it("a graph that cannot take them is loaded unchanged", async () => {
    const file = path.join(await llamaDtypesDir(), "onnx/model.onnx");
    // A Slice of an output the graph does not have makes the augmented graph invalid.
    const s = await createGraphSession(file, {}, ["present.99.key"]);
    expect(s.outputs.map((o) => o.name).some((n) => n.endsWith(".last_token"))).toBe(false);
    expect(s.outputs.map((o) => o.name)).toContain("present.0.key");
    await s.dispose();
  });
});
