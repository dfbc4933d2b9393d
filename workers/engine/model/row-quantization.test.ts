// Row-wise activation quantization (row-quantization.ts): which graphs get it; a pass of several
// rows gives each row, bit for bit, the logits the file's own nodes give it alone (int8 weights,
// and uint8 ones with a zero point, quantizers shared by several MatMulIntegers as
// quantize_dynamic writes them); and the check at load that the rows really are independent.
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import onnxProto from "onnx-proto";
import { afterAll, describe, expect, it } from "vitest";
import { llamaDtypesDir, llamaLayoutDir } from "../testing/models";
import { createRunner } from "./layouts";
import { loadModel, type LoadedModel } from "./load-model";
import { graphBytes, neededBytes } from "./memory-check";
import { scanOnnxOps, topologicalOrder } from "./onnx-scan";
import { columnSums, rowsIndependent, rowWisePlan, tensorBytes } from "./row-quantization";
import { createGraphSession, int64Tensor, kvTensor, newKvArray, type GraphSession, type OrtTensor } from "./session";

const file = async (dtype: string) =>
  path.join(
    await llamaDtypesDir(),
    "onnx",
    { q8: "model_quantized.onnx", int8: "model_int8.onnx", uint8: "model_uint8.onnx" }[dtype]!,
  );

const [ROWS, PAST] = [3, 5];

/** One decoding pass of `rows` (indices into ROWS distinct rows: tokens and pasts), logits per row. */
async function decode(s: GraphSession, rows: number[]): Promise<Float32Array[]> {
  const kv = s.inputs.filter((i) => i.name.startsWith("past_key_values."));
  const [, heads, , D] = kv[0].shape as number[];
  const feeds: Record<string, OrtTensor> = {
    input_ids: int64Tensor(
      rows.map((r) => 5 + 17 * r),
      [rows.length, 1],
    ),
    attention_mask: int64Tensor(new Array(rows.length * (PAST + 1)).fill(1), [rows.length, PAST + 1]),
    position_ids: int64Tensor(new Array(rows.length).fill(PAST), [rows.length, 1]),
  };
  const perRow = heads * PAST * D;
  for (const [e, input] of kv.entries()) {
    const data = newKvArray("float32", rows.length * perRow) as Float32Array;
    // Each row its own past, with magnitudes that differ by row (so would their scales).
    rows.forEach((r, i) => {
      for (let k = 0; k < perRow; k++) data[i * perRow + k] = (1 + 3 * r) * Math.sin(k * 0.37 + e + 11 * r);
    });
    feeds[input.name] = kvTensor("float32", data, [rows.length, heads, PAST, D]);
  }
  const logits = (await s.run(feeds, { logits: null })).logits;
  const vocab = logits.dims[2];
  const data = logits.data as Float32Array;
  return rows.map((_, i) => data.slice(i * vocab, (i + 1) * vocab));
}

const identical = (a: Float32Array, b: Float32Array) => a.length === b.length && a.every((v, i) => Object.is(v, b[i]));

describe.each(["q8", "int8", "uint8"])("a %s graph", (dtype) => {
  const sessions: GraphSession[] = [];
  afterAll(() => Promise.all(sessions.map((s) => s.dispose())));

  it("is planned with its quantizers shared as quantize_dynamic writes them", async () => {
    const graph = scanOnnxOps(await file(dtype));
    const plan = rowWisePlan(graph);
    expect(plan).not.toBeNull();
    const quantizers = graph.nodes.filter((n) => n.op === ":DynamicQuantizeLinear").length;
    const products = graph.nodes.filter((n) => n.op === ":MatMulInteger");
    // 2 layers: q/k/v, o, gate/up and down each; plus the head.
    expect(quantizers).toBe(2 * 4 + 1);
    expect(products.length).toBe(2 * 7 + 1);
    expect([...plan!.weights].sort()).toEqual(
      [...new Set(products.flatMap((n) => [n.inputs[1], n.inputs[3]]).filter(Boolean))].sort(),
    );
  });

  it("decodes rows together exactly as each alone, where the file's own nodes mix them", async () => {
    const f = await file(dtype);
    const plain = await createGraphSession(f);
    const served = await createGraphSession(f, {}, { rowWise: rowWisePlan(scanOnnxOps(f)) });
    sessions.push(plain, served);
    expect([plain.rowWise, served.rowWise]).toEqual([false, true]);
    const all = Array.from({ length: ROWS }, (_, r) => r);
    const alone: Float32Array[] = [];
    for (const r of all) alone.push((await decode(plain, [r]))[0]);
    for (const r of all) expect(identical((await decode(served, [r]))[0], alone[r])).toBe(true);
    const together = await decode(served, all);
    for (const r of all) expect(identical(together[r], alone[r]), `row ${r}`).toBe(true);
    // The file's own nodes quantize the three rows with one scale: their logits move.
    const mixed = await decode(plain, all);
    expect(all.some((r) => !identical(mixed[r], alone[r]))).toBe(true);
  });
});

describe("column sums", () => {
  it("equal one value at a time, for any number of rows (not only multiples of four)", () => {
    for (const K of [1, 3, 4, 7, 9]) {
      const N = 5;
      const values = Int8Array.from({ length: K * N }, (_, i) => ((i * 37 + K) % 256) - 128);
      const expected = Array.from({ length: N }, (_, n) => {
        let sum = 0;
        for (let k = 0; k < K; k++) sum += values[k * N + n];
        return sum;
      });
      expect([...columnSums(values, K, N)], `K = ${K}`).toEqual(expected);
    }
  });
});

describe("topological order (an If's branches must have one)", () => {
  const n = (input: string[], output: string[]) => ({ input, output });
  // Nodes as onnx-proto has them (the If's branches are sorted so).
  const sort = <T extends ReturnType<typeof n>>(nodes: T[]) =>
    topologicalOrder(nodes, (x) => ({ inputs: x.input, outputs: x.output }));
  it("puts each node after the producers of its inputs, keeping the given order where it already is one", () => {
    // As onnxruntime-genai's builder lists them: Add before the Gather it reads; graph inputs,
    // initializers and absent optional inputs ("") have no producer.
    const shape = n(["input_ids"], ["shape"]);
    const add = n(["gathered", "one"], ["sum"]);
    const gather = n(["shape", "zero"], ["gathered"]);
    const unsqueeze = n(["gathered", ""], ["unsqueezed"]);
    const out = n(["sum", "unsqueezed"], ["out"]);
    expect(sort([shape, add, gather, unsqueeze, out])).toEqual([shape, gather, add, unsqueeze, out]);
    const sorted = [shape, gather, add, unsqueeze, out];
    expect(sort(sorted)).toEqual(sorted);
    expect(sort([out, unsqueeze, add, gather, shape])).toEqual([shape, gather, add, unsqueeze, out]);
  });

  it("refuses a cycle", () => {
    expect(() => sort([n(["b"], ["a"]), n(["a"], ["b"])])).toThrow(/cycle/);
  });

  it("handles chains deeper than the call stack would", () => {
    const chain = Array.from({ length: 100_000 }, (_, i) => n([`v${i}`], [`v${i + 1}`])).reverse();
    const order = sort(chain);
    expect(order[0].input).toEqual(["v0"]);
    expect(order.at(-1)!.output).toEqual(["v100000"]);
  });
});

describe("which graphs are planned", () => {
  it("graphs without DynamicQuantizeLinear are not", async () => {
    const dir = await llamaDtypesDir();
    for (const name of ["model.onnx", "model_fp16.onnx", "model_q4.onnx"])
      expect(rowWisePlan(scanOnnxOps(path.join(dir, "onnx", name))), name).toBeNull();
  });

  it("a hybrid's q8 graph is, beside its states", async () => {
    expect(
      rowWisePlan(scanOnnxOps(path.join(await llamaLayoutDir("hybrid"), "onnx", "model_quantized.onnx"))),
    ).not.toBeNull();
  });
});

describe("loading", () => {
  const models: LoadedModel[] = [];
  afterAll(() => Promise.all(models.map((m) => m.dispose())));

  it("counts the weights twice in the memory check, as onnxruntime keeps them twice", async () => {
    const dir = await llamaDtypesDir();
    const bytes = graphBytes(dir, ["onnx/model_quantized.onnx"]);
    // Room for the weights twice: served row-wise.
    const twice = await loadModel(dir, { dtype: "q8", availableMemory: () => neededBytes(2 * bytes) });
    models.push(twice);
    expect(twice.session.rowWise).toBe(true);
    expect(twice.info.layout).toBe("padded");
    expect(twice.info.servingNotes).toEqual([]);
    // Room for them once, not twice: served as it is, one row per pass, rather than refused.
    const once = await loadModel(dir, { dtype: "q8", availableMemory: () => neededBytes(2 * bytes) - 1 });
    models.push(once);
    expect(once.session.rowWise).toBe(false);
    expect(once.info.layout).toBe("exact-length");
    // The deployment's status says why its requests do not share passes.
    expect(once.info.servingNotes).toEqual([
      expect.stringMatching(
        /^Concurrent requests run one pass each: holding its weights twice for row-wise quantization would need about [\d,]+ MiB of memory, and [\d,]+ MiB is available\.$/,
      ),
    ]);
    // Not even once: refused.
    await expect(loadModel(dir, { dtype: "q8", availableMemory: () => neededBytes(bytes) - 1 })).rejects.toMatchObject({
      reason: "insufficient_memory",
    });
  });
});

describe("the check at load", () => {
  const models: LoadedModel[] = [];
  afterAll(() => Promise.all(models.map((m) => m.dispose())));

  it("passes the row-wise graph and fails the file's own graph with its rows put together", async () => {
    const dir = await llamaDtypesDir();
    const served = await loadModel(dir, { dtype: "q8" });
    const asIs = await loadModel(dir, { dtype: "q8", rowWiseQuantization: false });
    models.push(served, asIs);
    expect(served.info).toMatchObject({ layout: "padded", graph: { rowsInteract: false } });
    expect(asIs.info).toMatchObject({ layout: "exact-length", graph: { rowsInteract: true } });
    expect(await rowsIndependent(served.runner, served.info.vocabSize)).toBe(true);
    // One row per pass, the file's rows never meet; padded, they share the quantization scale.
    expect(await rowsIndependent(asIs.runner, asIs.info.vocabSize)).toBe(true);
    const together = createRunner({ ...asIs.info.graph, rowsInteract: false }, asIs.session, asIs.info.vocabSize);
    expect(together.layout).toBe("padded");
    expect(await rowsIndependent(together, asIs.info.vocabSize)).toBe(false);
  });
});

describe("a GroupQueryAttention graph run one row per pass", () => {
  const models: LoadedModel[] = [];
  afterAll(() => Promise.all(models.map((m) => m.dispose())));

  for (const flag of ["rowsInteract", "batchOfOne"] as const)
    it(`gives each row its own logits (${flag})`, async () => {
      const model = await loadModel(await llamaLayoutDir("gqa"), {});
      models.push(model);
      expect(model.info.layout).toBe("gqa");
      const oneEach = createRunner({ ...model.info.graph, [flag]: true }, model.session, model.info.vocabSize);
      expect(oneEach.layout).toBe("gqa");
      // Before, every pass fetched into the same one-row buffer: both rows got the last row's logits.
      expect(await rowsIndependent(oneEach, model.info.vocabSize)).toBe(true);
    });
});

describe("external data of an initializer", () => {
  const external = (location: string, offset: number, length: number) =>
    onnxProto.onnx.TensorProto.create({
      name: "w",
      dataLocation: onnxProto.onnx.TensorProto.DataLocation.EXTERNAL,
      externalData: [
        { key: "location", value: location },
        { key: "offset", value: String(offset) },
        { key: "length", value: String(length) },
      ],
    });

  it("is read from a file of the model's own folder, within that file, and nowhere else", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "lmp-ext-"));
    mkdirSync(path.join(dir, "onnx"));
    writeFileSync(path.join(dir, "onnx/model.onnx_data"), Buffer.from([1, 2, 3, 4, 5, 6, 7, 8]));
    writeFileSync(path.join(dir, "secret"), "do not read");
    const model = path.join(dir, "onnx/model.onnx");
    expect([...tensorBytes(model, external("model.onnx_data", 2, 4), null)()]).toEqual([3, 4, 5, 6]);
    for (const location of ["../secret", path.join(dir, "secret"), "sub/../../secret"])
      expect(() => tensorBytes(model, external(location, 0, 4), null)(), location).toThrow(/not in the model's folder/);
    // A length past the file's end is refused before anything is allocated.
    expect(() => tensorBytes(model, external("model.onnx_data", 4, 2 ** 31), null)()).toThrow(/past the end/);
  });
});
