// Split attention (split-attention.ts): which graphs get it; a one-token pass over an even past
// takes it and gives, bit for bit, the outputs of the file's own nodes; the passes where it would
// not be exact (odd past, prompts, presents fetched) take the file's nodes; and the engine's
// tokens and log-probabilities are the same with it as without it.
import path from "node:path";
import onnxProto from "onnx-proto";
import { afterAll, describe, expect, it } from "vitest";
import { Engine } from "../engine";
import { llamaDtypesDir, llamaLayoutDir, tinyModelDir } from "../testing/models";
import { capacityFor } from "./layouts/rows-batch";
import { concatenatedColumns, presentsToSlice, servedModel } from "./last-token-outputs";
import { lastTokenOutput } from "./graph-signature";
import { scanOnnxOps, type GraphOps, type ScannedNode } from "./onnx-scan";
import { createGraphSession, int64Tensor, kvTensor, newKvArray, type GraphSession, type OrtTensor } from "./session";
import { rowWisePlan } from "./row-quantization";
import { SPLIT_INPUT, splitAttentionPlan } from "./split-attention";

const { onnx } = onnxProto;

/** Where a ModelProto's first `graph` field (7) ends. */
function firstGraphEnd(bytes: Buffer): number {
  let pos = 0;
  const varint = () => {
    let value = 0;
    for (let shift = 1; ; shift *= 128) {
      const b = bytes[pos++];
      value += (b & 0x7f) * shift;
      if (b < 0x80) return value;
    }
  };
  for (;;) {
    const tag = varint();
    const wire = tag % 8;
    if (wire === 0) varint();
    else if (wire === 2) {
      const end = varint() + pos;
      pos = end;
      if (Math.floor(tag / 8) === 7) return end;
    } else pos += wire === 1 ? 8 : 4;
  }
}

const planOf = (file: string) => {
  const graph = scanOnnxOps(file);
  return splitAttentionPlan(graph, concatenatedColumns(graph, presentsToSlice(graph)));
};

const sessions: GraphSession[] = [];
afterAll(async () => {
  for (const s of sessions) await s.dispose();
});

/** A session of `file` with the engine's additions, split attention planned or not. */
async function session(file: string, split: boolean): Promise<GraphSession> {
  const graph = scanOnnxOps(file);
  const presents = presentsToSlice(graph);
  const concatenated = concatenatedColumns(graph, presents);
  const s = await createGraphSession(
    file,
    {},
    { lastTokenOf: presents, concatenated, split: split ? splitAttentionPlan(graph, concatenated) : null },
  );
  sessions.push(s);
  return s;
}

/** One pass of `rows` rows × `fed` tokens over `past` columns of distinct finite values. */
async function pass(s: GraphSession, rows: number, fed: number, past: number, fetchPresents = false) {
  const kv = s.inputs.filter((i) => i.name.startsWith("past_key_values."));
  const [, heads, , D] = kv[0].shape as number[];
  const type = kv[0].type as "float32" | "float16";
  const feeds: Record<string, OrtTensor> = {
    input_ids: int64Tensor(
      Array.from({ length: rows * fed }, (_, i) => 3 + ((i * 37) % 200)),
      [rows, fed],
    ),
    attention_mask: int64Tensor(new Array(rows * (past + fed)).fill(1), [rows, past + fed]),
  };
  if (s.inputs.some((i) => i.name === "position_ids"))
    feeds.position_ids = int64Tensor(
      Array.from({ length: rows * fed }, (_, i) => past + (i % fed)),
      [rows, fed],
    );
  for (const [e, input] of kv.entries()) {
    const data = newKvArray(type, rows * heads * past * D);
    for (let k = 0; k < data.length; k++) data[k] = type === "float32" ? Math.sin(k * 0.37 + e) : 0x3800 + (k % 512);
    feeds[input.name] = kvTensor(type, data, [rows, heads, past, D]);
  }
  const fetches: Record<string, null> = { logits: null };
  for (const input of kv) {
    const present = input.name.replace("past_key_values", "present");
    fetches[fetchPresents ? present : lastTokenOutput(present)] = null;
  }
  const out = await s.run(feeds, fetches);
  return Object.fromEntries(Object.keys(fetches).map((k) => [k, Array.from(out[k].data as ArrayLike<number>)]));
}

describe("which graphs split their attention", () => {
  it("plans every layer's keys and values of standard exports, with and without repeat_kv", async () => {
    // GPT-2 (no grouping) and the llama (4 heads over 2 KV heads: Unsqueeze → Expand → Reshape),
    // both scaling the scores by a constant after the keys' product.
    const gpt2 = planOf(path.join(await tinyModelDir(), "onnx", "model.onnx"));
    expect(gpt2?.values.map((v) => [v.present, v.repeat.length])).toEqual([
      ["present.0.value", 0],
      ["present.1.value", 0],
    ]);
    expect(gpt2?.keys.map((k) => [k.present, k.repeat.length, k.scale?.op])).toEqual([
      ["present.0.key", 0, "Mul"],
      ["present.1.key", 0, "Mul"],
    ]);
    const llama = planOf(path.join(await llamaDtypesDir(), "onnx", "model.onnx"));
    const repeat = [":Unsqueeze", ":Expand", ":Reshape"];
    expect(llama?.values.map((v) => [v.present, v.repeat.map((r) => r.op)])).toEqual([
      ["present.0.value", repeat],
      ["present.1.value", repeat],
    ]);
    expect(llama?.keys.map((k) => [k.present, k.repeat.map((r) => r.op), k.scale?.op])).toEqual([
      ["present.0.key", repeat, "Mul"],
      ["present.1.key", repeat, "Mul"],
    ]);
  });

  it("splits no keys whose query is scaled before the product (onnxruntime fuses that into the file's product)", () => {
    const graphOf = (prescaled: boolean): GraphOps => {
      const nodes: ScannedNode[] = [
        { op: ":Concat", inputs: ["past_key_values.0.key", "k"], outputs: ["present.0.key"], axis: 2 },
        { op: ":Transpose", inputs: ["present.0.key"], outputs: ["kt"], perm: [0, 1, 3, 2] },
        ...(prescaled ? [{ op: ":Mul", inputs: ["q", "scale"], outputs: ["qs"] }] : []),
        { op: ":MatMul", inputs: [prescaled ? "qs" : "q", "kt"], outputs: ["scores"] },
      ];
      return {
        ops: new Set(nodes.map((n) => n.op)),
        inputs: ["input_ids", "attention_mask", "past_key_values.0.key"],
        outputs: ["logits", "present.0.key"],
        inputTypes: new Map([["past_key_values.0.key", 1]]),
        opset: 17,
        nodes,
        weightBits: new Set(),
      };
    };
    const columns = new Map([["present.0.key", "k"]]);
    expect(splitAttentionPlan(graphOf(false), columns)?.keys.map((k) => k.query)).toEqual(["q"]);
    expect(splitAttentionPlan(graphOf(true), columns)).toBeNull();
  });

  it("leaves GroupQueryAttention graphs, float16 caches and graphs with other inputs as they are", async () => {
    expect(planOf(path.join(await llamaLayoutDir("gqa"), "onnx", "model.onnx"))).toBeNull();
    expect(planOf(path.join(await llamaDtypesDir(), "onnx", "model_fp16.onnx"))).toBeNull();
    expect(planOf(path.join(await llamaLayoutDir("extra-inputs"), "onnx", "model.onnx"))).toBeNull();
  });

  it.each([
    ["fp32", "model.onnx", 4],
    // Row-wise quantization's If holds every node twice (one row; several rows): the split in both.
    ["q8 (row-wise)", "model_quantized.onnx", 8],
  ])(
    "%s: each planned product becomes an If, with the cache's Concat only in its else branch",
    async (_name, name, ifs) => {
      const file = path.join(await llamaDtypesDir(), "onnx", name);
      const graph = scanOnnxOps(file);
      const presents = presentsToSlice(graph);
      const concatenated = concatenatedColumns(graph, presents);
      const split = splitAttentionPlan(graph, concatenated)!;
      const rowWise = name === "model_quantized.onnx" ? rowWisePlan(graph) : null;
      const bytes = servedModel(file, presents, null, null, rowWise, concatenated, split);
      // The served bytes carry the graph twice (the engine's outputs are appended as a second graph
      // field, which onnxruntime merges): the first holds the nodes.
      const model = onnx.ModelProto.decode(bytes.subarray(0, firstGraphEnd(bytes)));
      // Every node of the served graph, branches included, with the If it sits in.
      const found: { node: InstanceType<typeof onnx.NodeProto>; within: string }[] = [];
      const walk = (g: InstanceType<typeof onnx.GraphProto>, within: string) => {
        for (const n of g.node ?? []) {
          found.push({ node: n as InstanceType<typeof onnx.NodeProto>, within });
          for (const a of n.attribute ?? [])
            if (a.g) walk(a.g as InstanceType<typeof onnx.GraphProto>, `${within}/${a.name}`);
        }
      };
      walk(model.graph as InstanceType<typeof onnx.GraphProto>, "");
      expect(found.length).toBeGreaterThan(20);
      const splits = found.filter((f) => f.node.opType === "If" && f.node.input[0] === SPLIT_INPUT);
      expect(splits).toHaveLength(ifs);
      // The caches' Concats (keys and values): only in the split Ifs' else branches.
      const cacheConcats = found.filter(
        (f) => f.node.opType === "Concat" && f.node.input[0]?.startsWith("past_key_values."),
      );
      expect(cacheConcats.length).toBe(ifs);
      for (const c of cacheConcats) expect(c.within.endsWith("/else_branch")).toBe(true);
    },
  );

  it("keeps the padded layout's capacity even, so that its one-token passes can split", () => {
    for (let longest = 0; longest <= 600; longest++) {
      expect(capacityFor(longest) % 2).toBe(0);
      expect(capacityFor(longest)).toBeGreaterThanOrEqual(longest + 16);
    }
  });
});

describe.each([
  ["gpt2 fp32", async () => path.join(await tinyModelDir(), "onnx", "model.onnx")],
  ["llama fp32 (repeat_kv)", async () => path.join(await llamaDtypesDir(), "onnx", "model.onnx")],
  ["llama q4", async () => path.join(await llamaDtypesDir(), "onnx", "model_q4.onnx")],
  ["llama without position_ids", async () => path.join(await llamaLayoutDir("no-position-ids"), "onnx", "model.onnx")],
])("%s", (_name, file) => {
  it("takes the split on one-token passes over an even past, bit for bit the file's outputs", async () => {
    const [split, plain] = [await session(await file(), true), await session(await file(), false)];
    // The load check passed: on these machines the split is exact.
    expect(split.splitAttention).toBe(true);
    expect(plain.splitAttention).toBe(false);
    for (const [rows, past] of [
      [1, 2],
      [3, 8],
      [2, 34],
      [4, 130],
    ]) {
      const before = split.stats.splitPasses;
      const [a, b] = [await pass(split, rows, 1, past), await pass(plain, rows, 1, past)];
      expect(split.stats.splitPasses, `${rows} rows, past ${past}`).toBe(before + 1);
      expect(a, `${rows} rows, past ${past}`).toEqual(b);
    }
    expect(plain.stats.splitPasses).toBe(0);
  });

  it("runs the file's nodes for an odd past, a prompt, and a pass that fetches the presents", async () => {
    const [split, plain] = [await session(await file(), true), await session(await file(), false)];
    const cases: [number, number, number, boolean][] = [
      [2, 1, 9, false], // odd past: the split would differ in the last bits
      [1, 5, 0, false], // a prompt
      [2, 4, 6, false], // a prompt's later chunk
      [2, 1, 8, true], // the whole presents wanted: the split does not make them
    ];
    for (const [rows, fed, past, presents] of cases) {
      const before = split.stats.splitPasses;
      expect(await pass(split, rows, fed, past, presents)).toEqual(await pass(plain, rows, fed, past, presents));
      expect(split.stats.splitPasses, `${rows}×${fed} over ${past}`).toBe(before);
    }
  });
});

describe("the engine with split attention", () => {
  it.each(["fp32", "q8", "q4"] as const)(
    "%s: samples the same tokens with the same log-probabilities as without it, 8 streams of different lengths",
    async (dtype) => {
      const dir = await llamaDtypesDir();
      const prompts = Array.from({ length: 8 }, (_, i) => "the river and the bridge ".repeat(1 + i).trim());
      const run = async (splitAttention: boolean) => {
        const engine = new Engine({ models: [dir], loadOptions: () => ({ dtype, splitAttention }) });
        const m = await engine.load();
        try {
          const results = await Promise.all(
            prompts.map((prompt, i) =>
              engine.generate({ prompt, max_tokens: 24 + 3 * i, temperature: 0.9, seed: 7 + i, logprobs: 3 }),
            ),
          );
          return {
            results,
            split: m.session.stats.splitPasses,
            passes: m.session.stats.forwardCalls,
            rowWise: m.session.rowWise,
          };
        } finally {
          await engine.dispose();
        }
      };
      const [withSplit, without] = [await run(true), await run(false)];
      expect(without.split).toBe(0);
      // q8 rows share passes through row-wise quantization, whose branches hold the split too.
      expect(withSplit.rowWise).toBe(dtype === "q8");
      // Most decoding passes took the split (the capacity is even; a few passes are prompts).
      expect(withSplit.split).toBeGreaterThan(withSplit.passes / 2);
      expect(withSplit.results.map((r) => r.choices)).toEqual(without.results.map((r) => r.choices));
    },
  );
});
