// A model that would not fit in the memory left is refused before its graph is loaded.
import { statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { llamaModelDir } from "../testing/models";
import { loadModel } from "./load-model";
import { availableMemoryBytes, neededBytes, reusable, trackedWeights } from "./memory-check";

let dir: string;
beforeAll(async () => {
  dir = await llamaModelDir(); // the third-party checkpoint: fp16 has its weights in model_fp16.onnx_data
});

describe("memory check", () => {
  it("refuses a graph, external data counted, that needs more than is available; loads it at the boundary", async () => {
    const size = (f: string) => statSync(path.join(dir, "onnx", f)).size;
    const weights = size("model_fp16.onnx") + size("model_fp16.onnx_data");
    // onnxruntime's CPU kernels hold a float16 graph's weights widened to float32: twice the file.
    const need = neededBytes(2 * weights);

    const refused = loadModel(dir, { dtype: "fp16", availableMemory: () => need - 1 });
    await expect(refused).rejects.toMatchObject({ code: "internal", reason: "insufficient_memory", param: "model" });
    await expect(refused).rejects.toThrow(/model_fp16\.onnx.*needs about \d+ MiB of memory.*has \d+ MiB available/);

    const m = await loadModel(dir, { dtype: "fp16", availableMemory: () => need });
    expect(m.info.dtype).toBe("fp16");
    await m.dispose();
    // (Without the 2 MB data file counted, need - 1 would have been plenty for the 39 kB graph.)
  });

  it("checks loads one at a time: two that fit only one by one are not both let through", async () => {
    const weights = statSync(path.join(dir, "onnx/model.onnx")).size;
    const base = trackedWeights().loaded;
    // Room for one fp32 load, not two: each check sees what the loads before it took.
    const budget = neededBytes(weights) + Math.floor(weights / 2);
    const available = () => budget - (trackedWeights().loaded - base);
    const [a, b] = await Promise.allSettled([
      loadModel(dir, { dtype: "fp32", availableMemory: available }),
      loadModel(dir, { dtype: "fp32", availableMemory: available }),
    ]);
    expect(a.status).toBe("fulfilled");
    expect(b).toMatchObject({ status: "rejected", reason: { reason: "insufficient_memory" } });
    if (a.status === "fulfilled") await a.value.dispose();
  });

  it("can be turned off", async () => {
    const m = await loadModel(dir, { dtype: "fp32", availableMemory: null });
    expect(m.info.dtype).toBe("fp32");
    await m.dispose();
  });

  it("counts the heap a released model left as available, as far as the resident size still holds it", async () => {
    const before = trackedWeights();
    const m = await loadModel(dir, { dtype: "fp16", availableMemory: null });
    const weights =
      statSync(path.join(dir, "onnx/model_fp16.onnx")).size +
      statSync(path.join(dir, "onnx/model_fp16.onnx_data")).size;
    // Loading reuses the heap earlier releases left.
    const reused = Math.min(before.released, weights);
    expect(trackedWeights()).toEqual({ loaded: before.loaded + weights, released: before.released - reused });
    await m.dispose();
    await m.dispose(); // a second release does nothing
    expect(trackedWeights()).toEqual({ loaded: before.loaded, released: before.released - reused + weights });

    const MiB = 2 ** 20;
    expect(reusable(500 * MiB, 0, 2048 * MiB)).toBe(500 * MiB);
    // glibc gave most of it back: only what the resident size holds beyond the loaded models.
    expect(reusable(500 * MiB, 0, 300 * MiB)).toBe(300 * MiB - neededBytes(0));
    expect(reusable(500 * MiB, 1024 * MiB, 1200 * MiB)).toBe(0);
  });

  it("reads what the system has left", () => {
    const available = availableMemoryBytes();
    expect(available).toBeGreaterThan(0);
    expect(available).toBeLessThanOrEqual(os.totalmem());
  });
});
