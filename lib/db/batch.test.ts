import { describe, expect, it } from "vitest";
import { createBatcher } from "./batch";

/** A `run` whose calls stay pending until released, recording every batch it got. */
function gatedRun<I>(result: (item: I) => unknown = (i) => i) {
  const batches: I[][] = [];
  const gates: (() => void)[] = [];
  const run = async (items: I[]) => {
    batches.push(items);
    await new Promise<void>((r) => gates.push(r));
    return items.map((i) => result(i)) as never[];
  };
  const releaseAll = async () => {
    while (gates.length > 0) {
      gates.splice(0).forEach((g) => g());
      await new Promise((r) => setTimeout(r, 0));
    }
  };
  return { batches, run, releaseAll };
}

describe("createBatcher", () => {
  it("sends a call at once while a slot is free, and coalesces what arrives meanwhile, in order", async () => {
    const g = gatedRun<number>((i) => i * 10);
    const call = createBatcher(g.run, { maxInFlight: 1, maxBatch: 100 });
    const results = Promise.all([1, 2, 3, 4].map(call));
    await Promise.resolve();
    expect(g.batches).toEqual([[1]]);
    await g.releaseAll();
    expect(g.batches).toEqual([[1], [2, 3, 4]]);
    expect(await results).toEqual([10, 20, 30, 40]);
  });

  it("runs up to maxInFlight batches at once and caps each at maxBatch", async () => {
    const g = gatedRun<number>();
    const call = createBatcher(g.run, { maxInFlight: 2, maxBatch: 3 });
    const results = Promise.all(Array.from({ length: 10 }, (_, i) => call(i)));
    await Promise.resolve();
    expect(g.batches).toEqual([[0], [1]]);
    await g.releaseAll();
    expect(g.batches.slice(2).every((b) => b.length <= 3)).toBe(true);
    expect(g.batches.flat().sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(await results).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it("stops a batch before maxWeight, but lets one heavier item go alone", async () => {
    const g = gatedRun<string>();
    const call = createBatcher(g.run, { maxInFlight: 1, maxBatch: 100, weight: (s) => s.length, maxWeight: 5 });
    const results = Promise.all(["a", "bb", "ccc", "dddddddd", "e"].map(call));
    await g.releaseAll();
    expect(g.batches).toEqual([["a"], ["bb", "ccc"], ["dddddddd"], ["e"]]);
    expect(await results).toEqual(["a", "bb", "ccc", "dddddddd", "e"]);
  });

  it("fails only the call whose slot holds an Error, and every call of a batch whose run rejects", async () => {
    const make = () =>
      createBatcher(
        async (items: number[]) => {
          if (items.includes(99)) throw new Error("statement failed");
          return items.map((i) => (i % 2 ? new Error(`odd ${i}`) : i));
        },
        { maxInFlight: 1, maxBatch: 100 },
      );
    let call = make();
    const settled = await Promise.allSettled([0, 1, 2, 3].map(call));
    expect(settled.map((s) => (s.status === "fulfilled" ? s.value : (s.reason as Error).message))).toEqual([
      0,
      "odd 1",
      2,
      "odd 3",
    ]);
    call = make();
    const first = call(0); // alone, in flight
    const failing = Promise.allSettled([call(4), call(99)]);
    expect(await first).toBe(0);
    expect((await failing).map((s) => s.status)).toEqual(["rejected", "rejected"]);
    // The batcher keeps working after a failed batch.
    expect(await call(6)).toBe(6);
  });

  it("with isolateFailures, reruns a failed batch call by call: only the bad item fails", async () => {
    const runs: number[][] = [];
    const call = createBatcher(
      async (items: number[]) => {
        runs.push(items);
        if (items.includes(99)) throw new Error("statement failed");
        return items;
      },
      { maxInFlight: 1, maxBatch: 100, isolateFailures: true },
    );
    const first = call(0); // alone, in flight: the next three queue up into one batch
    const settled = Promise.allSettled([call(4), call(99), call(5)]);
    expect(await first).toBe(0);
    expect((await settled).map((s) => (s.status === "fulfilled" ? s.value : (s.reason as Error).message))).toEqual([
      4,
      "statement failed",
      5,
    ]);
    expect(runs).toEqual([[0], [4, 99, 5], [4], [99], [5]]);
  });

  it("runs the batches of one many() call one after another, in order; other calls go on around them", async () => {
    const g = gatedRun<number>();
    const call = createBatcher(g.run, { maxInFlight: 4, maxBatch: 3, isolateFailures: true });
    const many = call.many([0, 1, 2, 3, 4, 5, 6, 7]);
    await Promise.resolve();
    // Four slots, yet one batch of the call: its rows must be written in its order.
    expect(g.batches).toEqual([[0, 1, 2]]);
    const single = call(100);
    await Promise.resolve();
    expect(g.batches).toEqual([[0, 1, 2], [100]]);
    await g.releaseAll();
    expect(g.batches).toEqual([[0, 1, 2], [100], [3, 4, 5], [6, 7]]);
    expect((await many).map((r) => (r as PromiseFulfilledResult<number>).value)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(await single).toBe(100);
  });

  it("reruns a failed batch of a many() call item by item in order, before its next batch", async () => {
    const runs: number[][] = [];
    let running = 0;
    let overlapped = false;
    const call = createBatcher(
      async (items: number[]) => {
        runs.push(items);
        overlapped ||= running > 0;
        running++;
        await new Promise((r) => setTimeout(r, 5));
        running--;
        if (items.length > 1 && items.includes(2)) throw new Error("statement failed");
        return items;
      },
      { maxInFlight: 4, maxBatch: 3, isolateFailures: true },
    );
    const results = await call.many([0, 1, 2, 3, 4]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "fulfilled", "fulfilled", "fulfilled"]);
    expect(runs).toEqual([[0, 1, 2], [0], [1], [2], [3, 4]]);
    expect(overlapped).toBe(false);
  });

  it("rejects every call of a batch when run returns the wrong number of results", async () => {
    const call = createBatcher(async () => [1], { maxInFlight: 1, maxBatch: 100 });
    const a = call(1);
    const rest = Promise.allSettled([call(2), call(3)]);
    expect(await a).toBe(1);
    expect((await rest).map((s) => s.status)).toEqual(["rejected", "rejected"]);
  });
});
