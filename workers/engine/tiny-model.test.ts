// The generated tiny model: deterministic from its seed, in the HF export layout, loadable by
// transformers.js itself, with a real byte-level BPE tokenizer and non-degenerate text.
import { AutoModelForCausalLM, AutoTokenizer } from "./transformers";
import { mkdtemp, readdir, readFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { generateTinyModel } from "@/scripts/tiny-model/generate";
import { Engine } from "./engine";
import { createGraphSession } from "./model/session";
import { llamaDtypesDir, llamaLayoutDir, tinyModelDir } from "./testing/models";

const FILES = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "onnx/model.onnx"];

describe("tiny model generator", () => {
  it("same seed, same bytes; another seed, other weights", async () => {
    const tmp = await mkdtemp(path.join(os.tmpdir(), "lmp-tiny-gen-"));
    const [a, b, c] = ["a", "b", "c"].map((d) => path.join(tmp, d));
    await generateTinyModel(a, { seed: 7 });
    await generateTinyModel(b, { seed: 7 });
    await generateTinyModel(c, { seed: 8 });
    for (const f of FILES)
      expect(Buffer.compare(await readFile(path.join(a, f)), await readFile(path.join(b, f))), f).toBe(0);
    expect(
      Buffer.compare(await readFile(path.join(a, "onnx/model.onnx")), await readFile(path.join(c, "onnx/model.onnx"))),
    ).not.toBe(0);
  });

  it("loads with transformers.js: tokenizer round trip, chat template, KV cache inputs", async () => {
    const dir = await tinyModelDir();
    const tok = await AutoTokenizer.from_pretrained(dir, { local_files_only: true });
    const text = "Hello world, 東京 😀!";
    const ids = tok.encode(text);
    expect(tok.decode(ids)).toBe(text);
    expect(tok.encode(" the village", { add_special_tokens: false }).length).toBe(2); // merges were learned
    const chat = tok.apply_chat_template([{ role: "user", content: "hi" }], {
      tokenize: false,
      add_generation_prompt: true,
    });
    expect(chat).toBe("<|user|>\nhi\n<|assistant|>\n");
    const model = await AutoModelForCausalLM.from_pretrained(dir, { dtype: "fp32", local_files_only: true });
    const session = (model as unknown as { sessions: { model: { inputNames: string[]; outputNames: string[] } } })
      .sessions.model;
    expect(session.inputNames).toEqual(
      expect.arrayContaining([
        "input_ids",
        "attention_mask",
        "position_ids",
        "past_key_values.0.key",
        "past_key_values.1.value",
      ]),
    );
    expect(session.outputNames).toEqual(expect.arrayContaining(["logits", "present.0.key", "present.1.value"]));
    const config = JSON.parse(await readFile(path.join(dir, "config.json"), "utf8"));
    expect(config).toMatchObject({ model_type: "gpt2", n_layer: 2, n_positions: 1024 });
  });

  it("sampled text is not degenerate", async () => {
    const engine = new Engine({ models: [await tinyModelDir()] });
    const r = await engine.generate({ prompt: "The", max_tokens: 60, seed: 1, logprobs: 1, n: 3 });
    for (const c of r.choices) {
      const ids = (c.logprobs ?? []).map((l) => l.token_id);
      expect(new Set(ids).size).toBeGreaterThan(ids.length / 3);
    }
    expect(r.choices.map((c) => c.text).join(" ")).toMatch(/\b(the|and|of|a|to|in)\b/);
  });
});

describe("generated export layouts", () => {
  const session = (dir: string, file = "onnx/model.onnx") => createGraphSession(path.join(dir, file));
  const names = (vs: readonly { name: string }[]) => vs.map((v) => v.name);
  const typeOf = (vs: readonly { name: string; type?: string }[], name: string) =>
    vs.find((v) => v.name === name)?.type;

  it("outputs only logits and present.N (no kv_delta), with or without position_ids", async () => {
    for (const dir of [await tinyModelDir(), await llamaDtypesDir(), await llamaLayoutDir("no-position-ids")]) {
      const s = await session(dir);
      expect(names(s.outputs).every((n) => n === "logits" || /^present\.\d+\.(key|value)$/.test(n))).toBe(true);
      expect(names(s.inputs).includes("position_ids")).toBe(dir !== (await llamaLayoutDir("no-position-ids")));
      await s.dispose();
    }
  });

  it("one graph per dtype: float16 cache and logits in fp16, quantized matmuls in q8 and q4", async () => {
    const dir = await llamaDtypesDir();
    const fp16 = await session(dir, "onnx/model_fp16.onnx");
    expect([typeOf(fp16.inputs, "past_key_values.0.key"), typeOf(fp16.outputs, "logits")]).toEqual([
      "float16",
      "float16",
    ]);
    await fp16.dispose();
    const config = JSON.parse(await readFile(path.join(dir, "config.json"), "utf8"));
    expect(config["transformers.js_config"]).toEqual({ kv_cache_dtype: { fp16: "float16", q4f16: "float16" } });
    const q4 = await readFile(path.join(dir, "onnx/model_q4.onnx"));
    const fp32 = await readFile(path.join(dir, "onnx/model.onnx"));
    expect(q4.length).toBeLessThan(fp32.length / 2);
  });

  it("external data in 2 files that the graph references, declared in config.json", async () => {
    const dir = await llamaLayoutDir("external-data");
    const files = await readdir(path.join(dir, "onnx"));
    expect(files.sort()).toEqual([
      "model.onnx",
      "model.onnx_data",
      "model.onnx_data_1",
      "model_q4.onnx",
      "model_q4.onnx_data",
      "model_q4.onnx_data_1",
      "model_quantized.onnx",
      "model_quantized.onnx_data",
      "model_quantized.onnx_data_1",
    ]);
    expect((await readFile(path.join(dir, "onnx/model.onnx"))).length).toBeLessThan(20_000);
    const config = JSON.parse(await readFile(path.join(dir, "config.json"), "utf8"));
    expect(config["transformers.js_config"].use_external_data_format).toEqual({
      "model.onnx": 2,
      "model_q4.onnx": 2,
      "model_quantized.onnx": 2,
    });
  });

  it("GroupQueryAttention (model-builder style) and the extra inputs real exports declare", async () => {
    const gqa = await session(await llamaLayoutDir("gqa"));
    expect(names(gqa.inputs)).toEqual(["input_ids", "attention_mask", ...pastNames(2)]);
    await gqa.dispose();
    const extras = await session(await llamaLayoutDir("extra-inputs"));
    expect(names(extras.inputs)).toEqual([
      "input_ids",
      "attention_mask",
      "position_ids",
      ...pastNames(2),
      "num_logits_to_keep",
      "use_cache_branch",
    ]);
    await extras.dispose();
  });

  it("same options, same bytes (q4 and external data included)", async () => {
    const tmp = await mkdtemp(path.join(os.tmpdir(), "lmp-tiny-gen-"));
    const opts = { family: "llama" as const, dtypes: ["q4" as const], externalData: 2, seed: 3 };
    await generateTinyModel(path.join(tmp, "a"), opts);
    await generateTinyModel(path.join(tmp, "b"), opts);
    for (const f of ["onnx/model_q4.onnx", "onnx/model_q4.onnx_data", "onnx/model_q4.onnx_data_1", "tokenizer.json"])
      expect(Buffer.compare(await readFile(path.join(tmp, "a", f)), await readFile(path.join(tmp, "b", f))), f).toBe(0);
  });
});

const pastNames = (layers: number) =>
  Array.from({ length: layers }, (_, l) => [`past_key_values.${l}.key`, `past_key_values.${l}.value`]).flat();
