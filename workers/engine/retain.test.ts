// Unloading what no deployment serves any more (Engine.retain): running requests finish first,
// then the session is released; a model wanted again meanwhile stays; a download stops at once.
import { mkdtemp } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cachedTinyModel } from "@/scripts/tiny-model/generate";
import { Engine } from "./engine";
import type { LoadedModel } from "./model/load-model";
import { startHubServer } from "./testing/hub-server";

let dir: string;
let hub: Awaited<ReturnType<typeof startHubServer>>;
beforeAll(async () => {
  dir = await cachedTinyModel({ family: "llama", dtypes: ["fp32", "q4"] });
  hub = await startHubServer({ repos: { "org/tiny": dir } });
});
afterAll(() => hub?.close());

const request = { prompt: "Once upon a time there was", max_tokens: 24, temperature: 0 };

/** Counts the model's releases (its session's). */
function watchDispose(m: LoadedModel): { count: number } {
  const seen = { count: 0 };
  const dispose = m.dispose.bind(m);
  m.dispose = async () => {
    seen.count++;
    await dispose();
  };
  return seen;
}

async function textOf(events: AsyncIterable<{ type: string; text?: string }>): Promise<string> {
  let text = "";
  for await (const e of events) if (e.type === "delta") text += e.text ?? "";
  return text;
}

describe("the default KV budgets of several models", () => {
  it("leave aside what the models loaded before may still take, so that together they fit", async () => {
    const GiB = 2 ** 30;
    const promptCacheBytes = 64 * 2 ** 20;
    const engine = new Engine({ models: [dir], availableMemory: () => 10 * GiB, promptCacheBytes });
    const first = await engine.scheduler(dir, "fp32");
    expect(first.kvBudget).toBe(5 * GiB); // half the memory left
    const second = await engine.scheduler(dir, "q4");
    // Half of what the first leaves: it may still fill its budget and prompt cache.
    expect(second.kvBudget).toBe((10 * GiB - (5 * GiB + promptCacheBytes)) / 2);
    expect(first.kvBudget + second.kvBudget + 2 * promptCacheBytes).toBeLessThanOrEqual(10 * GiB);
    // What the first holds is already out of the memory left: only its unused room is set aside.
    await engine.generate({ ...request, dtype: "fp32" });
    expect(first.stats().promptCacheBytes).toBeGreaterThan(0);
    expect(first.unclaimedBytes()).toBe(
      5 * GiB + promptCacheBytes - first.stats().kvBytes - first.stats().promptCacheBytes,
    );
    // Unloaded, it sets nothing aside any more: loaded again, it has half of what the second leaves.
    const unloaded: string[] = [];
    engine.retain([{ model: dir, dtype: "q4" }], (model, dtype) => unloaded.push(dtype));
    await expect.poll(() => unloaded, { timeout: 5_000 }).toEqual(["fp32"]);
    const again = await engine.scheduler(dir, "fp32");
    expect(again.kvBudget).toBe((10 * GiB - second.unclaimedBytes()) / 2);
    await engine.dispose();
  });
});

describe("the memory check of a second model", () => {
  it("counts what the first may still take: its weights must fit in what that leaves", async () => {
    const GiB = 2 ** 30;
    // Enough for the tiny model's weights alone, not once the first's budget is set aside.
    let free = 10 * GiB;
    const engine = new Engine({ models: [dir], availableMemory: () => free });
    const first = await engine.scheduler(dir, "fp32");
    free = first.unclaimedBytes() + 2 ** 20; // 1 MiB beyond what the first may still take
    await expect(engine.scheduler(dir, "q4")).rejects.toMatchObject({ reason: "insufficient_memory" });
    await engine.dispose();
  });
});

describe("a load cancelled while onnxruntime builds its session (which cannot be stopped)", () => {
  it("is not served once built, is released, and sets no budget aside for the load that replaced it", async () => {
    const GiB = 2 ** 30;
    const engine = new Engine({ models: [dir], availableMemory: () => 10 * GiB });
    let rewanted: Promise<unknown> | undefined;
    const loading = engine.load(dir, "fp32", (p) => {
      if (p.state !== "loading" || rewanted) return;
      // Deleted and created again while its graph loads.
      engine.retain([]);
      rewanted = engine.scheduler(dir, "fp32");
    });
    await expect(loading).rejects.toMatchObject({ reason: "cancelled" });
    const again = (await rewanted) as Awaited<ReturnType<Engine["scheduler"]>>;
    // Half the memory, as for the only model: before, the cancelled load's scheduler was kept
    // (never closed) and its budget set aside from every later one's.
    expect(again.kvBudget).toBe(5 * GiB);
    expect((await engine.loadStats()).map((l) => [l.dtype, l.retiring])).toEqual([["fp32", undefined]]);
    await engine.dispose();
  });
});

describe("Engine.retain", () => {
  it("lets the running requests of a model no longer wanted finish, then releases it", async () => {
    const engine = new Engine({ models: [dir] });
    const m = await engine.load(dir, "fp32");
    const released = watchDispose(m);
    const solo = (await engine.generate({ ...request, dtype: "fp32" })).choices[0]!.text;

    const events = await engine.start({ ...request, dtype: "fp32" });
    const unloaded: string[] = [];
    engine.setModels([]);
    engine.retain([], (model, dtype) => unloaded.push(`${model} ${dtype}`));
    // Still counted (metrics, /health) while its request runs.
    const [draining] = await engine.loadStats();
    expect(draining).toMatchObject({ id: dir, dtype: "fp32", retiring: 1 });
    expect(Number(draining!.running) + Number(draining!.queued) + Number(draining!.prefilling)).toBeGreaterThan(0);
    expect(await textOf(events)).toBe(solo);
    const counted = await engine.counts();
    expect(counted.promptCacheHits).toBeGreaterThan(0); // the second run of the same prompt

    await expect.poll(() => unloaded, { timeout: 5_000 }).toEqual([`${dir} fp32`]);
    expect(released.count).toBe(1);
    expect(await engine.loadStats()).toEqual([]);
    // The worker's counters keep what the unloaded model counted (before: they fell back to 0).
    expect(await engine.counts()).toEqual(counted);
    await expect(engine.generate({ ...request, dtype: "fp32" })).rejects.toMatchObject({ code: "model_not_found" });
  });

  it("keeps a model wanted again before its requests have finished, and unloads only the other dtype", async () => {
    const engine = new Engine({ models: [dir] });
    const fp32 = await engine.load(dir, "fp32");
    const q4 = await engine.load(dir, "q4");
    const released = { fp32: watchDispose(fp32), q4: watchDispose(q4) };
    const unloaded: string[] = [];

    const events = await engine.start({ ...request, dtype: "fp32" });
    engine.retain([], (model, dtype) => unloaded.push(dtype));
    // The deployment's dtype changed back and forth: fp32 is wanted again, q4 not.
    engine.retain([{ model: dir, dtype: "fp32" }], (model, dtype) => unloaded.push(dtype));
    await textOf(events);

    await expect.poll(() => unloaded, { timeout: 5_000 }).toEqual(["q4"]);
    expect(released).toMatchObject({ fp32: { count: 0 }, q4: { count: 1 } });
    expect(await engine.load(dir, "fp32")).toBe(fp32);
    expect((await engine.generate({ ...request, dtype: "fp32" })).choices[0]!.text.length).toBeGreaterThan(0);
    expect((await engine.loadStats()).map((s) => s.dtype)).toEqual(["fp32"]);
    await engine.dispose();
  });

  it("releases a model without waiting for another one's download", async () => {
    hub.fault({ file: "onnx/model.onnx", after: 1024, kind: "slow", times: 1 }); // stalls for 2 s
    const cacheDir = await mkdtemp(path.join(os.tmpdir(), "lmp-retain-"));
    const hubOptions = { endpoint: hub.url, token: null, offline: false, cacheDir };
    const engine = new Engine({ models: [dir, "org/tiny"], loadOptions: () => ({ hub: hubOptions }) });
    const states: string[] = [];
    // The download first: it comes before the local model in every list the engine keeps.
    const downloading = engine.load("org/tiny", "fp32", (p) => states.push(p.state));
    await expect.poll(() => states.includes("downloading"), { timeout: 10_000 }).toBe(true);
    await engine.load(dir, "q4");
    const unloaded: string[] = [];
    const t0 = Date.now();
    engine.retain([{ model: "org/tiny", dtype: "fp32" }], (model, dtype) => unloaded.push(`${model} ${dtype}`));
    await expect.poll(() => unloaded, { timeout: 5_000 }).toEqual([`${dir} q4`]);
    expect(Date.now() - t0).toBeLessThan(1_000);
    await downloading;
    await engine.dispose();
  });

  it("stops a download in progress at once", async () => {
    // The graph stalls after its first kilobyte (for seconds): the load is still downloading.
    hub.fault({ file: "onnx/model.onnx", after: 1024, kind: "slow", times: 1 });
    const cacheDir = await mkdtemp(path.join(os.tmpdir(), "lmp-retain-"));
    const hubOptions = { endpoint: hub.url, token: null, offline: false, cacheDir };
    const engine = new Engine({ models: ["org/tiny"], loadOptions: () => ({ hub: hubOptions }) });
    const states: string[] = [];
    const loading = engine.load("org/tiny", "fp32", (p) => states.push(p.state));
    await expect.poll(() => states.includes("downloading"), { timeout: 10_000 }).toBe(true);
    // The worker's metrics answer meanwhile: a load in progress is left out, not waited for.
    const asked = Date.now();
    expect(await engine.loadStats()).toEqual([]);
    expect(Date.now() - asked).toBeLessThan(500);
    const t0 = Date.now();
    engine.retain([]);
    // Wanted again at once, before the cancelled load has even failed.
    const rewanted = engine.load("org/tiny", "fp32");
    await expect(loading).rejects.toMatchObject({ reason: "cancelled" });
    expect(Date.now() - t0).toBeLessThan(1_000);
    // A new load, resuming the partial file, not the cancelled one.
    const again = await rewanted;
    expect(again.info.dtype).toBe("fp32");
    expect((await engine.loadStats()).map((l) => [l.id, l.dtype, l.retiring])).toEqual([
      ["org/tiny", "fp32", undefined],
    ]);
    await engine.dispose();
  });
});
