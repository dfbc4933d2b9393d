// The graph's extra last-token outputs (last-token-outputs.ts): the same numbers as the last
// column of the full present, weights still read from the model file, and a graph that cannot
// take them loaded unchanged. And which graphs get their language-model head sliced to the last
// position: the head is found through position-wise ops only, and anything else leaves the graph
// unchanged.
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { llamaDtypesDir, llamaLayoutDir, llamaQuantizedDir } from "../testing/models";
import { lastTokenOutput } from "./graph-signature";
import {
  concatenatedColumns,
  lastPositionHead,
  modelWithWeightsByReference,
  newColumnAt,
  presentsToSlice,
  servedModel,
} from "./last-token-outputs";
import { scanOnnxOps, type GraphOps, type ScannedNode } from "./onnx-scan";
import { rowWisePlan } from "./row-quantization";
import {
  createGraphSession,
  int64Tensor,
  kvTensor,
  newKvArray,
  type GraphAdditions,
  type GraphSession,
  type OrtTensor,
} from "./session";
import { GraphIo } from "./layouts/feeds";
import type { PrefillState } from "./layouts/layout";
import { loadModel } from "./load-model";

/**
 * Feeds for `ids` ([rows][positions], all rows as long) after `past` columns of cache, each
 * entry's past filled with distinct finite values so that a mixed-up output would show.
 */
function decoderFeeds(s: GraphSession, ids: number[][], past: number) {
  const [B, S] = [ids.length, ids[0].length];
  const kvMeta = s.inputs.find((i) => i.name === "past_key_values.0.key")!;
  const [, heads, , D] = kvMeta.shape as number[];
  const type = kvMeta.type as "float32" | "float16";
  const feeds: Record<string, OrtTensor> = {
    input_ids: int64Tensor(ids.flat(), [B, S]),
    attention_mask: int64Tensor(new Array(B * (past + S)).fill(1), [B, past + S]),
    position_ids: int64Tensor(
      ids.flatMap((row) => row.map((_, j) => past + j)),
      [B, S],
    ),
  };
  for (const i of s.inputs.filter((i) => i.name.startsWith("past_key_values."))) {
    const data = newKvArray(type, B * heads * past * D);
    for (let k = 0; k < data.length; k++) data[k] = type === "float32" ? Math.sin(k + i.name.length) : 0x3c00;
    feeds[i.name] = kvTensor(type, data, [B, heads, past, D]);
  }
  return { feeds, heads, D };
}

/** One pass of 3 rows × 1 new token over `past` columns (with `slice`'s last-token outputs), fetching `outputs`. */
async function pass(file: string, slice: string[], outputs: string[], concatenated?: ReadonlyMap<string, string>) {
  const s = await createGraphSession(file, {}, { lastTokenOf: slice, concatenated });
  const [B, past] = [3, 5];
  const { feeds, heads, D } = decoderFeeds(s, [[5], [9], [11]], past);
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
    // The standard export's Concat inputs, exposed under the same names instead of sliced.
    const concatenated = concatenatedColumns(scanOnnxOps(file), presents);
    expect([...concatenated.keys()]).toEqual(presents);
    const direct = await pass(file, presents, presents.map(lastTokenOutput), concatenated);
    for (const got of [sliced, direct]) {
      expect(got.outputNames).toEqual(expect.arrayContaining(presents.map(lastTokenOutput)));
      const { heads, D, B, past } = full;
      for (const p of presents) {
        const whole = full.result[p].data as Float32Array;
        const last = got.result[lastTokenOutput(p)];
        expect(last.dims).toEqual([B, heads, 1, D]);
        const expected: number[] = [];
        for (let bh = 0; bh < B * heads; bh++)
          expected.push(...whole.subarray((bh * (past + 1) + past) * D, (bh * (past + 1) + past + 1) * D));
        expect(Array.from(last.data as Float32Array)).toEqual(expected);
      }
      expect(Array.from(got.result.logits.data as Float32Array)).toEqual(
        Array.from(full.result.logits.data as Float32Array),
      );
    }
  });

  it("take a standard export's new columns from its Concats, adding no node", async () => {
    const file = path.join(await llamaDtypesDir(), "onnx/model.onnx");
    const graph = scanOnnxOps(file);
    const presents = presentsToSlice(graph);
    const served = (concatenated?: ReadonlyMap<string, string>) => {
      const dir = mkdtempSync(path.join(os.tmpdir(), "lmp-served-"));
      try {
        const copy = path.join(dir, "model.onnx");
        writeFileSync(copy, servedModel(file, presents, null, null, null, concatenated));
        return scanOnnxOps(copy);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    };
    const sliced = served();
    const direct = served(concatenatedColumns(graph, presents));
    expect(sliced.nodes.length - graph.nodes.length).toBe(presents.length + 3); // a Slice each, and S
    expect(direct.nodes.length).toBe(graph.nodes.length);
    for (const g of [sliced, direct]) expect(g.outputs).toEqual(expect.arrayContaining(presents.map(lastTokenOutput)));
    // Each Concat now reads the renamed tensor, which its producer writes.
    for (const p of presents) {
      const concat = direct.nodes.find((n) => n.outputs[0] === p)!;
      expect(concat.inputs[1]).toBe(lastTokenOutput(p));
      expect(direct.nodes.filter((n) => n.outputs.includes(lastTokenOutput(p)))).toHaveLength(1);
    }
  });

  it("find a present's Concat only along the sequence axis, of its own past and of a computed tensor", () => {
    const past = "past_key_values.0.key";
    const ops = (concat: ScannedNode) =>
      graph([node(":MatMul", ["hidden", "wk"], ["k_new"]), concat], {
        inputs: ["input_ids", "attention_mask", "position_ids", past, "other_input"],
        outputs: ["logits", "present.0.key"],
      });
    const concat = (inputs: string[], axis?: number): ScannedNode => ({
      op: ":Concat",
      inputs,
      outputs: ["present.0.key"],
      ...(axis === undefined ? {} : { axis }),
    });
    expect(concatenatedColumns(ops(concat([past, "k_new"], 2)), ["present.0.key"])).toEqual(
      new Map([["present.0.key", "k_new"]]),
    );
    expect(concatenatedColumns(ops(concat([past, "k_new"], -2)), ["present.0.key"]).size).toBe(1);
    for (const other of [
      concat([past, "k_new"], 0), // along the batch
      concat([past, "k_new"]), // no axis read
      concat(["past_key_values.1.key", "k_new"], 2), // another layer's past
      concat([past, "other_input"], 2), // a graph input
      concat([past, "k_new", "k_new"], 2), // three inputs
    ])
      expect(concatenatedColumns(ops(other), ["present.0.key"]).size).toBe(0);
  });

  it("of a GroupQueryAttention graph are each row's column at its own length", async () => {
    // Rows of lengths 2, 5 and 3 in one pass over a capacity of 8 columns, right-padded as the
    // layout feeds them: the op writes row r's new column at length_r.
    const file = path.join(await llamaLayoutDir("gqa"), "onnx/model.onnx");
    const graph = scanOnnxOps(file);
    const presents = presentsToSlice(graph);
    expect(presents.length).toBeGreaterThan(1);
    expect(newColumnAt(graph)).toBeTruthy();
    const lengths = [2, 5, 3];
    const [B, cap, width] = [3, 8, 6];
    const run = async (slice: boolean) => {
      const s = await createGraphSession(
        file,
        {},
        {
          lastTokenOf: slice ? presents : [],
          columnAt: slice ? newColumnAt(graph) : null,
        },
      );
      const kvMeta = s.inputs.find((i) => i.name === "past_key_values.0.key")!;
      const [, heads, , D] = kvMeta.shape as number[];
      const mask = new Array(B * width).fill(0);
      lengths.forEach((len, r) => mask.fill(1, r * width, r * width + len + 1));
      const feeds: Record<string, OrtTensor> = {
        input_ids: int64Tensor([5, 9, 11], [B, 1]),
        attention_mask: int64Tensor(mask, [B, width]),
      };
      const fetches: Record<string, OrtTensor | null> = { logits: null };
      const buffers: Record<string, Float32Array> = {};
      for (const i of s.inputs.filter((i) => i.name.startsWith("past_key_values."))) {
        const data = new Float32Array(B * heads * cap * D).map((_, k) => Math.sin(k + i.name.length));
        feeds[i.name] = kvTensor("float32", data, [B, heads, cap, D]);
        const present = i.name.replace("past_key_values", "present");
        buffers[present] = data;
        // Without the outputs, the present is the past's own buffer (the op works in place).
        fetches[slice ? lastTokenOutput(present) : present] = slice ? null : feeds[i.name];
      }
      const result = await s.run(feeds, fetches);
      await s.dispose();
      return { result, buffers, heads, D };
    };
    const shared = await run(false);
    const sliced = await run(true);
    const { heads, D } = shared;
    for (const p of presents) {
      const whole = shared.buffers[p];
      const column = sliced.result[lastTokenOutput(p)];
      expect(column.dims).toEqual([B, heads, 1, D]);
      const expected: number[] = [];
      for (let r = 0; r < B; r++)
        for (let h = 0; h < heads; h++) {
          const at = ((r * heads + h) * cap + lengths[r]) * D;
          expected.push(...whole.subarray(at, at + D));
        }
      expect(Array.from(column.data as Float32Array)).toEqual(expected);
    }
    expect(Array.from(sliced.result.logits.data as Float32Array)).toEqual(
      Array.from(shared.result.logits.data as Float32Array),
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

  it("are added to every graph whose new column can be found", async () => {
    const dtypes = await llamaDtypesDir();
    const count = (file: string) => presentsToSlice(scanOnnxOps(file)).length;
    // Padded (q4), exact-length (per-tensor activation quantization; positions from the past
    // length), GroupQueryAttention (each row's column at its seqlens_k).
    expect(count(path.join(dtypes, "onnx/model_q4.onnx"))).toBeGreaterThan(0);
    expect(count(path.join(dtypes, "onnx/model_quantized.onnx"))).toBeGreaterThan(0);
    expect(count(path.join(await llamaLayoutDir("no-position-ids"), "onnx/model.onnx"))).toBeGreaterThan(0);
    const gqa = scanOnnxOps(path.join(await llamaLayoutDir("gqa"), "onnx/model.onnx"));
    expect(presentsToSlice(gqa).length).toBeGreaterThan(0);
    // GroupQueryAttention nodes that disagree on seqlens_k: no column to take, none added.
    const disagreeing = {
      ...gqa,
      nodes: gqa.nodes.map((n, i) =>
        n.op === "com.microsoft:GroupQueryAttention" && i % 2
          ? { ...n, inputs: n.inputs.map((x, k) => (k === 5 ? "other" : x)) }
          : n,
      ),
    };
    expect(newColumnAt(disagreeing)).toBeNull();
    expect(presentsToSlice(disagreeing)).toEqual([]);
  });

  it("a graph that cannot take them is loaded unchanged", async () => {
    const file = path.join(await llamaDtypesDir(), "onnx/model.onnx");
    // A Slice of an output the graph does not have makes the augmented graph invalid.
    const s = await createGraphSession(file, {}, { lastTokenOf: ["present.99.key"] });
    expect(s.outputs.map((o) => o.name).some((n) => n.endsWith(".last_token"))).toBe(false);
    expect(s.outputs.map((o) => o.name)).toContain("present.0.key");
    // Said so (a ready deployment's status tells its operators, see ModelInfo.servingNotes).
    expect(s.unchanged).toBe(true);
    await s.dispose();
    const fine = await createGraphSession(file, {}, { lastTokenOf: presentsToSlice(scanOnnxOps(file)) });
    expect(fine.unchanged).toBe(false);
    await fine.dispose();
  });
});

const node = (op: string, inputs: string[], outputs: string[]): ScannedNode => ({ op, inputs, outputs });

/** A decoder's tail: final norm → [nodes] → logits, with input_ids feeding the norm. */
function graph(tail: ScannedNode[], extra: Partial<GraphOps> = {}): GraphOps {
  const nodes = [
    node(":Gather", ["embed", "input_ids"], ["h0"]),
    node(":SimplifiedLayerNormalization", ["h0", "w"], ["hidden"]),
    ...tail,
  ];
  return {
    ops: new Set(nodes.map((n) => n.op)),
    inputs: ["input_ids", "attention_mask", "position_ids"],
    outputs: ["logits"],
    inputTypes: new Map(),
    opset: 17,
    nodes,
    weightBits: new Set(),
    ...extra,
  };
}

describe("a prompt prefilled in chunks", () => {
  // GraphIo.prefill fetches only each chunk's columns (the last S of each present) into buffers
  // sized for the prompt, re-strided in place: the same cache and logits, bit for bit, as fetching
  // the whole presents after every chunk (the same session, its new-column outputs ignored).
  it.each([
    ["standard (padded)", () => llamaDtypesDir(), "fp32"],
    ["float16 cache", () => llamaDtypesDir(), "fp16"],
    ["per-tensor quantized (q8)", () => llamaDtypesDir(), "q8"],
    ["no position_ids", () => llamaLayoutDir("no-position-ids"), "fp32"],
    ["GroupQueryAttention", () => llamaLayoutDir("gqa"), "fp32"],
  ] as const)("%s: equals fetching the whole presents", async (_, dir, dtype) => {
    const m = await loadModel(await dir(), { dtype });
    try {
      const sig = m.info.graph;
      expect(sig.kv.entries.every((e) => e.lastToken)).toBe(true);
      const inPlace = new GraphIo(sig, m.session, m.info.vocabSize);
      const whole = new GraphIo(
        { ...sig, kv: { ...sig.kv, entries: sig.kv.entries.map(({ past, present }) => ({ past, present })) } },
        m.session,
        m.info.vocabSize,
      );
      const ids = m.tokenizer.encode("The bridge was built two hundred years ago with stones from the hills, and");
      expect(ids.length).toBeGreaterThan(12);
      let a: { state: PrefillState; logits: Float32Array } | null = null;
      let b: { state: PrefillState; logits: Float32Array } | null = null;
      for (const [start, end] of [
        [0, 5],
        [5, 6],
        [6, 12],
        [12, ids.length],
      ]) {
        a = await inPlace.prefill(a?.state ?? null, ids, start, end);
        b = await whole.prefill(b?.state ?? null, ids, start, end);
        expect(a.state.length).toBe(end);
        expect(Array.from(a.logits)).toEqual(Array.from(b.logits));
        a.state.presents.forEach((t, i) => {
          expect(t.dims).toEqual(b!.state.presents[i].dims);
          expect(Array.from(t.data as ArrayLike<number>), sig.kv.entries[i].past).toEqual(
            Array.from(b!.state.presents[i].data as ArrayLike<number>),
          );
        });
      }
      expect(a!.state.buffers?.length).toBe(sig.kv.entries.length);
      expect(b!.state.buffers).toBeUndefined();
    } finally {
      await m.dispose();
    }
  });
});

describe("lastPositionHead", () => {
  it("finds a MatMul head, also behind casts, a bias and a softcap", () => {
    expect(lastPositionHead(graph([node(":MatMul", ["hidden", "lm_w"], ["logits"])]))).toEqual({
      node: "logits",
      source: "hidden",
    });
    const tail = [
      node(":Transpose", ["embed"], ["embed_t"]), // tied weights: static, not an activation
      node(":MatMul", ["hidden", "embed_t"], ["l0"]),
      node(":Add", ["l0", "bias"], ["l1"]),
      node(":Div", ["l1", "cap"], ["l2"]),
      node(":Tanh", ["l2"], ["l3"]),
      node(":Mul", ["l3", "cap"], ["l4"]),
      node(":Cast", ["l4"], ["logits"]),
    ];
    expect(lastPositionHead(graph(tail))).toEqual({ node: "l0", source: "hidden" });
    expect(lastPositionHead(graph([node("com.microsoft:MatMulNBits", ["hidden", "q", "scales"], ["logits"])]))).toEqual(
      { node: "logits", source: "hidden" },
    );
  });

  it("finds it in a graph that lists nodes before their inputs' producers (as some exports do)", () => {
    const tail = [
      node(":MatMul", ["normed", "lm_w"], ["logits"]),
      node(":Mul", ["scaled", "norm_w"], ["normed"]),
      node(":Div", ["hidden", "rms"], ["scaled"]),
    ];
    expect(lastPositionHead(graph(tail))).toEqual({ node: "logits", source: "normed" });
  });

  it("finds a per-tensor quantized head at its MatMulInteger, after the quantizer", () => {
    const tail = [
      node(":DynamicQuantizeLinear", ["hidden"], ["hq", "hs", "hz"]),
      node(":MatMulInteger", ["hq", "wq", "hz", "wz"], ["l0"]),
      node(":Cast", ["l0"], ["l1"]),
      node(":Mul", ["hs", "ws"], ["scales"]),
      node(":Mul", ["l1", "scales"], ["logits"]),
    ];
    expect(lastPositionHead(graph(tail))).toEqual({ node: "l0", source: "hq" });
  });

  it("leaves the graph alone when the way to logits is not position-wise or not the head's alone", () => {
    const none = [
      // a Reshape between the head and logits (a flattened [B*S, H] head)
      [node(":MatMul", ["hidden", "lm_w"], ["l0"]), node(":Reshape", ["l0", "shape"], ["logits"])],
      // a product of two activations
      [node(":Relu", ["hidden"], ["hidden2"]), node(":MatMul", ["hidden", "hidden2"], ["logits"])],
      // another node reads the head's output
      [
        node(":MatMul", ["hidden", "lm_w"], ["l0"]),
        node(":Cast", ["l0"], ["logits"]),
        node(":ReduceMax", ["l0"], ["other"]),
      ],
      // a node reads logits (its output would change shape too)
      [node(":MatMul", ["hidden", "lm_w"], ["logits"]), node(":Softmax", ["logits"], ["probs"])],
      // weights fed as the first input
      [node(":MatMul", ["lm_w", "hidden"], ["logits"])],
      // a per-tensor quantized head multiplied by another activation
      [
        node(":DynamicQuantizeLinear", ["hidden"], ["hq", "hs", "hz"]),
        node(":MatMulInteger", ["hq", "wq", "hz", "wz"], ["l0"]),
        node(":Cast", ["l0"], ["l1"]),
        node(":Mul", ["l1", "h0"], ["logits"]),
      ],
    ];
    for (const tail of none) expect(lastPositionHead(graph(tail)), tail.map((n) => n.op).join(" ")).toBeNull();
    const head = [node(":MatMul", ["hidden", "lm_w"], ["logits"])];
    expect(lastPositionHead(graph(head, { inputs: ["input_ids", "attention_mask", "num_logits_to_keep"] }))).toBeNull();
    expect(lastPositionHead(graph(head, { opset: 9 }))).toBeNull();
    // a tensor between the head and logits is an output of the graph too
    const exported = [node(":MatMul", ["hidden", "lm_w"], ["l0"]), node(":Cast", ["l0"], ["logits"])];
    expect(lastPositionHead(graph(exported, { outputs: ["logits", "l0"] }))).toBeNull();
    expect(lastPositionHead(graph(exported))).toEqual({ node: "l0", source: "hidden" });
  });
});

/** The last position's logits of one 7-token prompt through `file` served with `additions`. */
async function promptLogits(file: string, additions: GraphAdditions) {
  const s = await createGraphSession(file, {}, additions);
  const { feeds } = decoderFeeds(s, [[5, 9, 11, 300, 7, 42, 4]], 0);
  const { logits } = await s.run(feeds, { logits: null });
  await s.dispose();
  const V = logits.dims[2];
  return { positions: logits.dims[1], last: (logits.data as Float32Array).slice(-V), rowWise: s.rowWise };
}

describe("a per-tensor quantized head sliced to the last position", () => {
  it.each([
    ["generated llama, q8", () => llamaDtypesDir(), "model_quantized.onnx"],
    ["generated llama, uint8", () => llamaDtypesDir(), "model_uint8.onnx"],
    ["tiny-random-llama, q8", () => llamaQuantizedDir("q8"), "model_quantized.onnx"],
  ])("%s: gives the file's logits bit for bit, served as it is and row-wise", async (_name, dir, name) => {
    const file = path.join(await dir(), "onnx", name);
    const graph = scanOnnxOps(file);
    const head = lastPositionHead(graph);
    expect(head).not.toBeNull();
    // The head reads a quantizer's output: the slice comes after the quantizer.
    expect(graph.nodes.find((n) => n.outputs[0] === head!.node)?.op).toBe(":MatMulInteger");
    const whole = await promptLogits(file, {});
    const sliced = await promptLogits(file, { head });
    const rowWise = await promptLogits(file, { head, rowWise: rowWisePlan(graph) });
    expect([whole.positions, sliced.positions, rowWise.positions]).toEqual([7, 1, 1]);
    expect(rowWise.rowWise).toBe(true);
    const same = (a: Float32Array, b: Float32Array) => a.length === b.length && a.every((v, i) => Object.is(v, b[i]));
    expect(same(sliced.last, whole.last)).toBe(true);
    expect(same(rowWise.last, whole.last)).toBe(true);
    // Sliced before its quantizer instead, the last position would get a scale of its own.
    const quantizer = graph.nodes.find((n) => n.outputs[0] === head!.source)!;
    expect(quantizer.op).toBe(":DynamicQuantizeLinear");
    const early = await promptLogits(file, { head: { node: head!.source, source: quantizer.inputs[0] } });
    expect(early.positions).toBe(1);
    expect(same(early.last, whole.last)).toBe(false);
  });
});
