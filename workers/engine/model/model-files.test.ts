// Which graph file a dtype names, what `auto` picks, and what the graph scan finds.
import { cp, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { FLOAT, GraphBuilder, MS_DOMAIN, UINT8 } from "@/scripts/tiny-model/onnx-builder";
import { AUTO_PREFERENCE, DTYPES, externalDataFiles, onnxFileFor } from "./dtypes";
import { chooseGraph, isLocalPath } from "./model-folder";
import { scanOnnxOps } from "./onnx-scan";
import { llamaDtypesDir, llamaLayoutDir } from "../testing/models";
import { loadModel } from "./load-model";
import { modelDtypes } from "./model-dtypes";

const repo = (...files: string[]) => ["config.json", "tokenizer.json", ...files];

describe("a model's name", () => {
  it("is a folder when absolute or ./relative; org/name is the hub's even where such a folder exists", async () => {
    // Folders that exist relative to where the tests (and a worker) run.
    expect(["workers/engine", "node_modules/onnxruntime-node"].map(isLocalPath)).toEqual([false, false]);
    expect([path.resolve("workers/engine"), "./workers/engine", "../x"].map(isLocalPath)).toEqual([true, true, true]);
    // Not shaped like a hub id and there: a folder still (three segments).
    expect(isLocalPath("workers/engine/model")).toBe(true);
    expect(isLocalPath("org/name")).toBe(false);
  });
});

describe("dtype files", () => {
  it("uses transformers.js' file names", () => {
    expect(Object.fromEntries(DTYPES.map((d) => [d, onnxFileFor(d)]))).toEqual({
      fp32: "onnx/model.onnx",
      fp16: "onnx/model_fp16.onnx",
      q8: "onnx/model_quantized.onnx",
      int8: "onnx/model_int8.onnx",
      uint8: "onnx/model_uint8.onnx",
      q4: "onnx/model_q4.onnx",
      q4f16: "onnx/model_q4f16.onnx",
      bnb4: "onnx/model_bnb4.onnx",
      q2: "onnx/model_q2.onnx",
      q2f16: "onnx/model_q2f16.onnx",
    });
  });

  it("names q1 files (1-bit weights, which onnxruntime cannot run) and never picks them", () => {
    const files = repo("onnx/model_q1.onnx", "onnx/model_q1f16.onnx");
    const why = "1-bit MatMulNBits weights, which onnxruntime's CPU kernels do not run (they take 2, 4 and 8 bits)";
    expect(() => chooseGraph("org/m", files, "auto", { "transformers.js_config": { dtype: "q1" } })).toThrow(
      expect.objectContaining({
        reason: "unsupported_layout",
        message: `model org/m has no graph this engine can run; it has: onnx/model_q1.onnx (q1: ${why}), onnx/model_q1f16.onnx (q1f16: ${why})`,
      }),
    );
    expect(chooseGraph("org/m", [...files, "onnx/model_q2f16.onnx"], "auto", {}).dtype).toBe("q2f16");
  });

  it("finds external data files, split ones included, and only those of the graph", () => {
    const files = repo(
      "onnx/model_fp16.onnx",
      "onnx/model_fp16.onnx_data",
      "onnx/model_fp16.onnx_data_1",
      "onnx/model.onnx_data",
    );
    expect(externalDataFiles("onnx/model_fp16.onnx", files)).toEqual([
      "onnx/model_fp16.onnx_data",
      "onnx/model_fp16.onnx_data_1",
    ]);
    expect(chooseGraph("m", files, "fp16", {})).toEqual({
      dtype: "fp16",
      graph: "onnx/model_fp16.onnx",
      data: ["onnx/model_fp16.onnx_data", "onnx/model_fp16.onnx_data_1"],
    });
  });

  it("auto takes the publisher's transformers.js_config.dtype when present, else the first preferred file", () => {
    const all = repo(...DTYPES.map((d) => onnxFileFor(d)));
    expect(chooseGraph("m", all, "auto", {}).dtype).toBe(AUTO_PREFERENCE[0]);
    expect(chooseGraph("m", all, "auto", { "transformers.js_config": { dtype: "fp16" } }).dtype).toBe("fp16");
    // A config naming a file the repository lacks falls back to the preference.
    expect(chooseGraph("m", repo("onnx/model.onnx"), "auto", { "transformers.js_config": { dtype: "q4" } }).dtype).toBe(
      "fp32",
    );
    for (const [i, d] of AUTO_PREFERENCE.entries()) {
      const worse = AUTO_PREFERENCE.slice(i).map((x) => onnxFileFor(x));
      expect(chooseGraph("m", repo(...worse), "auto", {}).dtype).toBe(d);
    }
  });

  it("a dtype the model lacks is refused, naming the files it has", () => {
    expect(() => chooseGraph("org/m", repo("onnx/model.onnx", "onnx/model_q4.onnx"), "fp16", {})).toThrow(
      expect.objectContaining({
        reason: "missing_dtype",
        message:
          "model org/m has no onnx/model_fp16.onnx (dtype fp16); it has: onnx/model.onnx (fp32), onnx/model_q4.onnx (q4)",
      }),
    );
    expect(() => chooseGraph("org/m", repo("README.md"), "auto", {})).toThrow(
      expect.objectContaining({ reason: "invalid_model", message: expect.stringContaining("has no ONNX graph") }),
    );
  });

  it("loadModel takes the requested file and refuses a missing or unknown dtype", async () => {
    const dir = await llamaDtypesDir();
    const m = await loadModel(dir, { dtype: "q4" });
    expect(m).toMatchObject({ graphFile: "onnx/model_q4.onnx", info: { dtype: "q4" } });
    await m.dispose();
    await expect(loadModel(dir, { dtype: "bnb4" })).rejects.toMatchObject({
      code: "model_not_found",
      reason: "missing_dtype",
      message: expect.stringMatching(
        /no onnx\/model_bnb4\.onnx.*onnx\/model\.onnx \(fp32\).*onnx\/model_q4f16\.onnx \(q4f16\)/,
      ),
    });
    await expect(loadModel(dir, { dtype: "q3" as never })).rejects.toMatchObject({ message: 'unknown dtype "q3"' });
    await expect(loadModel(dir, { dtype: "q1" as never })).rejects.toMatchObject({
      reason: "unsupported_layout",
      message: expect.stringMatching(/^dtype q1 cannot be served: 1-bit MatMulNBits weights/),
    });
  });

  it("refuses a graph with 1-bit MatMulNBits weights before onnxruntime reads it, naming the width", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "lmp-q1-"));
    await cp(await llamaLayoutDir("two-bit"), dir, { recursive: true });
    // The q2 file's name, a 1-bit layer inside (onnxruntime 1.30 fails such a session at creation).
    const g = new GraphBuilder();
    g.inputs.push(g.valueInfo("x", FLOAT, ["n", 64]));
    g.outputs.push(g.valueInfo("y", FLOAT, ["n", 8]));
    g.initializer("w", UINT8, [8, 2, 4], new Uint8Array(64));
    g.initializer("s", FLOAT, [16], new Float32Array(16).fill(1));
    g.op("MatMulNBits", ["x", "w", "s"], { K: 64, N: 8, bits: 1, block_size: 32 }, "y", MS_DOMAIN);
    await writeFile(path.join(dir, "onnx/model_q2.onnx"), g.encode(17).graph);
    await writeFile(path.join(dir, "onnx/model_q1.onnx"), g.encode(17).graph);
    // Listing (the CLI's check at deployment:create): q1 is named with why, never offered.
    expect(await modelDtypes(dir)).toEqual({
      dtypes: ["q2", "q2f16"],
      auto: "q2",
      unsupported: [
        "onnx/model_q1.onnx (q1: 1-bit MatMulNBits weights, which onnxruntime's CPU kernels do not run (they take 2, 4 and 8 bits))",
      ],
    });
    await expect(loadModel(dir, { dtype: "q2" })).rejects.toMatchObject({
      reason: "unsupported_layout",
      message:
        `model ${dir} (onnx/model_q2.onnx) has 1-bit MatMulNBits weights, which onnxruntime's CPU kernels ` +
        "do not run (they take 2, 4, 8 bits): deploy another dtype of it",
    });
    await rm(dir, { recursive: true, force: true });
  });
});

describe("graph scan", () => {
  it("lists operators without loading weights, subgraph-free exports and external data alike", async () => {
    const dtypes = await llamaDtypesDir();
    const q4 = scanOnnxOps(path.join(dtypes, "onnx/model_q4.onnx")).ops;
    expect(q4.has("com.microsoft:MatMulNBits")).toBe(true);
    expect(scanOnnxOps(path.join(dtypes, "onnx/model_q4.onnx")).weightBits).toEqual(new Set([4]));
    const twoBit = await llamaLayoutDir("two-bit");
    expect(scanOnnxOps(path.join(twoBit, "onnx/model_q2f16.onnx")).weightBits).toEqual(new Set([2]));
    expect(scanOnnxOps(path.join(dtypes, "onnx/model.onnx")).weightBits).toEqual(new Set());
    expect(q4.has(":MatMul")).toBe(true); // attention products stay float
    const q8 = scanOnnxOps(path.join(dtypes, "onnx/model_quantized.onnx")).ops;
    expect([...q8].filter((o) => o.includes("Integer") || o.includes("Dynamic")).sort()).toEqual([
      ":DynamicQuantizeLinear",
      ":MatMulInteger",
    ]);
    const gqa = scanOnnxOps(path.join(await llamaLayoutDir("gqa"), "onnx/model.onnx")).ops;
    expect(gqa.has("com.microsoft:GroupQueryAttention")).toBe(true);
    const external = scanOnnxOps(path.join(await llamaLayoutDir("external-data"), "onnx/model.onnx")).ops;
    expect(external.has(":Softmax")).toBe(true);
  });
});
