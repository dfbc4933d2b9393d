// The generated tiny model: deterministic from its seed, in the HF export layout, loadable by
// transformers.js itself, with a real byte-level BPE tokenizer and non-degenerate text.
import { AutoModelForCausalLM, AutoTokenizer } from "@huggingface/transformers";
import { mkdtemp, readFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { generateTinyModel } from "@/scripts/tiny-model/generate";
import { Engine } from "./engine";
import { configureHfEnv } from "./hf-env";
import { tinyModelDir } from "./testing/models";

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
    configureHfEnv();
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
