// Model loading: local folders, lazy cache, clear errors, and the 2048-token request limit.
import { cp, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
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
});
