// Why the layouts batch the way they do: counter-examples showing that the obvious shortcut would
// change results (so layouts.test.ts would catch it), and graphs the engine refuses at load.
import { cp, mkdtemp, readFile, writeFile } from "node:fs/promises";
import onnxProto from "onnx-proto";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BOOL, FLOAT, GraphBuilder, INT64 } from "@/scripts/tiny-model/onnx-builder";
import { Engine } from "./engine";
import { LAYOUTS } from "./model/layouts";
import { GraphIo } from "./model/layouts/feeds";
import { loadModel, type LoadedModel } from "./model/load-model";
import { int64Tensor, kvTensor, newKvArray, type OrtTensor } from "./model/session";
import { llamaDtypesDir, llamaLayoutDir, tinyModelDir } from "./testing/models";

const { onnx } = onnxProto;
const PROMPTS = ["Hi", "The dog sleeps in the", "Once upon a time there was a small village near a river"];
const engines: Engine[] = [];
afterAll(() => Promise.all(engines.map((e) => e.dispose())));

async function soloAndTogether(m: LoadedModel) {
  const engine = new Engine({ models: [m.dir], registry: { get: async () => m } as never });
  const run = (prompt: string) =>
    engine.generate({ prompt, max_tokens: 16, temperature: 0 }).then((r) => r.choices[0].text);
  const solo = [];
  for (const p of PROMPTS) solo.push(await run(p));
  return { solo, together: await Promise.all(PROMPTS.map(run)) };
}

describe("layout choice", () => {
  it("a graph without position_ids served with padding (positions = padded past length) would change its output", async () => {
    const m = await loadModel(await llamaLayoutDir("no-position-ids"));
    expect(m.info.layout).toBe("exact-length");
    const right = await soloAndTogether(m);
    expect(right.together).toEqual(right.solo);
    const padded = LAYOUTS.find((l) => l.name === "padded")!;
    const io = new GraphIo(m.info.graph, m.session, m.info.vocabSize);
    m.runner = { ...m.runner, createBatch: () => padded.create(io) };
    const wrong = await soloAndTogether(m);
    // Even alone: the padded cache's capacity is taken for the past length.
    expect(wrong.solo).not.toEqual(right.solo);
    expect(wrong.together).not.toEqual(right.solo);
    await m.dispose();
  });

  it("per-tensor quantized (q8) rows interact within a pass of the file as it is, not once quantized row by row", async () => {
    const maxDiff = async (dtype: "q8" | "fp32", rowWiseQuantization = true) => {
      const m = await loadModel(await llamaDtypesDir(), { dtype, rowWiseQuantization });
      expect(m.session.rowWise).toBe(dtype === "q8" && rowWiseQuantization);
      expect(m.info.graph.rowsInteract).toBe(dtype === "q8" && !rowWiseQuantization);
      const { kv } = m.info.graph;
      const prefill = (ids: number[][]) => {
        const [B, S] = [ids.length, ids[0].length];
        const feeds: Record<string, OrtTensor> = {
          input_ids: int64Tensor(ids.flat(), [B, S]),
          attention_mask: int64Tensor(new Array(B * S).fill(1), [B, S]),
          position_ids: int64Tensor(
            ids.flatMap((r) => r.map((_, i) => i)),
            [B, S],
          ),
        };
        for (const e of kv.entries)
          feeds[e.past] = kvTensor(kv.type, newKvArray(kv.type, 0), [B, kv.heads, 0, kv.headDim]);
        return m.session.run(feeds, { logits: null });
      };
      const a = [10, 20, 30, 40];
      const alone = (await prefill([a])).logits.data as Float32Array;
      const batched = (await prefill([a, [400, 5, 77, 3]])).logits.data as Float32Array;
      let diff = 0;
      for (let i = 0; i < alone.length; i++) diff = Math.max(diff, Math.abs(alone[i] - batched[i]));
      await m.dispose();
      return diff;
    };
    expect(await maxDiff("q8", false)).toBeGreaterThan(1e-3);
    // Bit for bit: the row's scale and zero point are the ones it gets alone (model/row-quantization.ts).
    expect(await maxDiff("q8")).toBe(0);
    expect(await maxDiff("fp32")).toBeLessThan(1e-4);
  });
});

describe("a graph whose batch dimension is pinned to 1", () => {
  it("runs one row per pass and still equals its solo results", async () => {
    const src = await llamaDtypesDir();
    const dir = await mkdtemp(path.join(os.tmpdir(), "lmp-batch1-"));
    await cp(src, dir, { recursive: true });
    const file = path.join(dir, "onnx", "model.onnx");
    const model = onnx.ModelProto.decode(await readFile(file));
    for (const v of [...model.graph!.input!, ...model.graph!.output!])
      v.type!.tensorType!.shape!.dim![0] = { dimValue: 1 };
    await writeFile(file, onnx.ModelProto.encode(model).finish());
    const m = await loadModel(dir, { dtype: "fp32" });
    expect(m.info).toMatchObject({ layout: "exact-length", graph: { batchOfOne: true, positionIds: true } });
    const { solo, together } = await soloAndTogether(m);
    expect(together).toEqual(solo);
    await m.dispose();
  });
});

/** A copy of the tiny model whose onnx/model.onnx is replaced by `build`'s graph. */
async function withGraph(build: (g: GraphBuilder) => void): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "lmp-graph-"));
  await cp(await tinyModelDir(), dir, { recursive: true });
  const g = new GraphBuilder();
  build(g);
  await writeFile(path.join(dir, "onnx", "model.onnx"), g.encode(17).graph);
  return dir;
}

/** logits = Identity of a float input, plus whatever inputs/outputs `extra` adds. */
const graph =
  (inputs: [string, number, (number | string)[]][], outputs: [string, number, (number | string)[]][]) =>
  (g: GraphBuilder) => {
    for (const [n, t, s] of inputs) g.inputs.push(g.valueInfo(n, t, s));
    for (const [n, t, s] of outputs) {
      g.outputs.push(g.valueInfo(n, t, s));
      const source = inputs.find(([, it]) => it === t)?.[0];
      g.op("Identity", [source ?? inputs[0][0]], {}, n);
    }
  };

describe("graphs the engine refuses at load", () => {
  const kv = (
    type: number,
    shape: (number | string)[] = ["batch", 2, "past", 8],
  ): [string, number, (number | string)[]][] => [
    ["past_key_values.0.key", type, shape],
    ["past_key_values.0.value", type, shape],
  ];
  const ids: [string, number, (number | string)[]][] = [
    ["input_ids", INT64, ["batch", "seq"]],
    ["attention_mask", INT64, ["batch", "total"]],
  ];
  const outs = (type = FLOAT): [string, number, (number | string)[]][] => [
    ["logits", type, ["batch", "seq", 10]],
    ["present.0.key", type, ["batch", 2, "total", 8]],
    ["present.0.value", type, ["batch", 2, "total", 8]],
  ];

  it.each([
    ["no KV cache", graph(ids, [["logits", INT64, ["batch", "seq"]]]), /no input past_key_values\.N\.key\/value/],
    [
      "an input it cannot feed",
      graph([...ids, ["token_type_ids", INT64, ["batch", "seq"]], ...kv(FLOAT)], outs()),
      /token_type_ids is not supported/,
    ],
    [
      "a past without its present",
      graph([...ids, ...kv(FLOAT)], [["logits", FLOAT, ["batch", "seq", 10]]]),
      /no output present\.0\.key, present\.0\.value/,
    ],
    ["a KV cache of another type", graph([...ids, ...kv(BOOL)], outs(BOOL)), /KV cache type bool is not supported/],
    [
      "a KV cache of another shape",
      graph([...ids, ...kv(FLOAT, ["batch", "past", 16])], outs()),
      /KV cache shape .* is not supported/,
    ],
    [
      "layers with different KV head counts",
      graph(
        [
          ...ids,
          ...kv(FLOAT),
          ["past_key_values.1.key", FLOAT, ["batch", 4, "past", 8]],
          ["past_key_values.1.value", FLOAT, ["batch", 4, "past", 8]],
        ],
        [
          ...outs(),
          ["present.1.key", FLOAT, ["batch", 4, "total", 8]],
          ["present.1.value", FLOAT, ["batch", 4, "total", 8]],
        ],
      ),
      /past_key_values\.1\.key has shape \["batch",4,"past",8\].*layers differ in heads, head size or type/,
    ],
    [
      'a recurrent state whose size grows (past_ssm.1 [batch, "past", 8])',
      graph(
        [...ids, ...kv(FLOAT), ["past_ssm.1", FLOAT, ["batch", "past", 8]]],
        [...outs(), ["present_ssm.1", FLOAT, ["batch", "total", 8]]],
      ),
      /state past_ssm\.1 has shape \["batch","past",8\]: only states of a fixed size per row/,
    ],
    [
      "a recurrent state without its present",
      graph([...ids, ...kv(FLOAT), ["past_conv.1", FLOAT, ["batch", 16, 3]]], outs()),
      /no output present_conv\.1 for its past inputs/,
    ],
    [
      "a recurrent state of another type",
      graph(
        [...ids, ...kv(FLOAT), ["past_conv.1", INT64, ["batch", 16, 3]]],
        [...outs(), ["present_conv.1", INT64, ["batch", 16, 3]]],
      ),
      /state past_conv\.1 has type int64/,
    ],
  ])("%s", async (_name, build, message) => {
    const err = await loadModel(await withGraph(build)).catch((e) => e);
    expect(err).toMatchObject({
      code: "invalid_model",
      reason: "unsupported_layout",
      message: expect.stringMatching(message),
    });
  });
});
