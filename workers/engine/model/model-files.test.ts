// Which graph file a dtype names, what `auto` picks, and what the graph scan finds.
import path from "node:path";
import { describe, expect, it } from "vitest";
import { AUTO_PREFERENCE, DTYPES, externalDataFiles, onnxFileFor } from "./dtypes";
import { chooseGraph } from "./model-folder";
import { scanOnnxOps } from "./onnx-scan";
import { llamaDtypesDir, llamaLayoutDir } from "../testing/models";
import { loadModel } from "./load-model";

const repo = (...files: string[]) => ["config.json", "tokenizer.json", ...files];

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
    });
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
  });
});

describe("graph scan", () => {
  it("lists operators without loading weights, subgraph-free exports and external data alike", async () => {
    const dtypes = await llamaDtypesDir();
    const q4 = scanOnnxOps(path.join(dtypes, "onnx/model_q4.onnx")).ops;
    expect(q4.has("com.microsoft:MatMulNBits")).toBe(true);
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
