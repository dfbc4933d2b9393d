// Model loading: local folders, lazy cache, clear errors, and the 2048-token request limit.
import { cp, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { Engine } from "./engine";
import { ModelRegistry } from "./model/registry";
import { llamaDtypesDir, llamaModelDir, tinyModelDir } from "./testing/models";

describe("model loading", () => {
  it("loads lazily and caches by id", async () => {
    const registry = new ModelRegistry();
    const dir = await tinyModelDir();
    expect(registry.loadedIds()).toEqual([]);
    const [a, b] = await Promise.all([registry.get(dir), registry.get(dir)]);
    expect(a).toBe(b);
    expect(a.info).toMatchObject({ contextLength: 1024, usesPositionIds: true });
    expect(registry.loadedIds()).toEqual([dir]);
  });

  it("a missing folder fails with a clear error", async () => {
    const missing = path.join(os.tmpdir(), "lmp-no-such-model-folder");
    await expect(new ModelRegistry().get(missing)).rejects.toMatchObject({
      code: "model_not_found",
      message: expect.stringContaining(missing),
    });
  });

  it("a folder without the ONNX graph or with a broken config says what is wrong", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "lmp-bad-model-"));
    await cp(await tinyModelDir(), dir, { recursive: true });
    await rm(path.join(dir, "onnx"), { recursive: true });
    await expect(new ModelRegistry().get(dir)).rejects.toMatchObject({
      code: "invalid_model",
      message: expect.stringContaining("onnx/model.onnx"),
    });
    await writeFile(path.join(dir, "config.json"), "{ not json");
    await expect(new ModelRegistry().get(dir)).rejects.toMatchObject({
      code: "invalid_model",
      message: expect.stringContaining("config.json"),
    });
  });

  it("an engine asks loadOptions on each request: a changed dtype serves the other graph", async () => {
    const dir = await llamaDtypesDir();
    let dtype: "fp32" | "q4" = "fp32";
    const engine = new Engine({ models: [dir], loadOptions: () => ({ dtype }) });
    expect((await engine.load()).info.dtype).toBe("fp32");
    dtype = "q4";
    expect((await engine.load()).info.dtype).toBe("q4");
    const r = await engine.generate({ prompt: "Hello", max_tokens: 3, temperature: 0 });
    expect(r.usage.completion_tokens).toBeGreaterThan(0);
    await engine.dispose();
  });

  it("an engine refuses models it does not serve", async () => {
    const engine = new Engine({ models: [await tinyModelDir()] });
    await expect(engine.generate({ model: "other/model", prompt: "Hi" })).rejects.toMatchObject({
      code: "model_not_found",
    });
  });

  it("llama: prompt tokens + max_tokens above 2048 is refused with both numbers", async () => {
    const engine = new Engine({ models: [await llamaModelDir()] });
    const m = await engine.load();
    const loaded = m.stats.forwardCalls; // the load's probes
    const prompt = "Hello world";
    const n = m.tokenizer.encode(prompt).length;
    const err = await engine.generate({ prompt, max_tokens: 2048 }).catch((e) => e);
    expect(err).toMatchObject({ code: "context_length_exceeded" });
    expect(err.message).toContain(`= ${n + 2048}`);
    expect(err.message).toContain("2048");
    expect(m.stats.forwardCalls).toBe(loaded);
    const ok = await engine.generate({ prompt, max_tokens: 3, temperature: 0 });
    expect(ok.usage.completion_tokens).toBe(3);
  });

  it("llama: stops at the tokenizer's end of sequence too, when the config names another", async () => {
    const engine = new Engine({ models: [await llamaModelDir()] });
    const m = await engine.load();
    // This checkpoint's configs say 1 (its "<s>"); its tokenizer's eos_token is "</s>", id 2.
    expect(m.tokenizer.eos_token_id).toBe(2);
    expect(m.info.eosTokenIds).toEqual([1, 2]);
    const forced = await engine.generate({ prompt: "Hello", max_tokens: 8, temperature: 0, logit_bias: { "2": 100 } });
    // Before, only id 1 ended it: eight "</s>" later, finish_reason "length".
    expect(forced.choices[0]).toMatchObject({ text: "", finish_reason: "stop" });
  });

  it("llama: a prompt that cannot fit is refused without tokenizing it all; a long one that fits runs", async () => {
    const engine = new Engine({ models: [await llamaModelDir()] });
    const m = await engine.load();
    expect(m.info.maxTokenChars).toBe(16); // the vocabulary's longest entry: 16 "▁"
    const encode = vi.spyOn(m.tokenizer, "encode");
    try {
      // Past 2048 × 16 characters: refused before any tokenizing (a million characters took seconds
      // of the worker's thread, every stream on it stalled).
      const huge = await engine.generate({ prompt: "word ".repeat(200_000), max_tokens: 4 }).catch((e) => e);
      expect(huge).toMatchObject({ code: "context_length_exceeded", param: "max_tokens" });
      expect(huge.message).toContain("1000000 characters");
      expect(encode).not.toHaveBeenCalled();
      // Within that, but its first 8,196 characters alone are past the limit: only they are tokenized.
      const chat = await engine
        .generate({ messages: [{ role: "user", content: "a ".repeat(12_000) }], max_tokens: 4 })
        .catch((e) => e);
      expect(chat).toMatchObject({ code: "context_length_exceeded" });
      expect(chat.message).toMatch(/at least \d+ tokens/);
      expect(encode).toHaveBeenCalledTimes(1);
      expect((encode.mock.calls[0]![0] as string).length).toBe(4 * 2049);
      // Many characters, few tokens (runs of spaces are 16 a token): the prefix does not refuse it.
      const spaces = " ".repeat(12_000) + "Hello";
      const ran = await engine.generate({ prompt: spaces, max_tokens: 2, temperature: 0 });
      expect(ran.usage.prompt_tokens).toBe(m.tokenizer.encode(spaces).length);
      expect(ran.usage.prompt_tokens).toBeLessThan(1000);
    } finally {
      encode.mockRestore();
    }
  });
});
