// The KV cache budget: requests wait rather than grow the batch's cache past it, and a request
// that alone would exceed it is refused with the figures.
import { beforeAll, describe, expect, it } from "vitest";
import { Engine } from "./engine";
import type { LoadedModel } from "./model/load-model";
import { tinyModelDir } from "./testing/models";

let dir: string;
let bytesPerToken: number;
let noEos: Record<string, number>;
beforeAll(async () => {
  dir = await tinyModelDir();
  const probe = new Engine({ models: [dir] });
  const m = await probe.load();
  const { kv } = m.info.graph;
  // Every request runs to its max_tokens: rows then overlap for sure.
  noEos = Object.fromEntries(m.info.eosTokenIds.map((id) => [String(id), -100]));
  bytesPerToken = kv.entries.length * kv.heads * kv.headDim * (kv.type === "float16" ? 2 : 4);
  await probe.dispose();
});

const request = (max_tokens: number) => ({
  prompt: "The dog sleeps in the",
  max_tokens,
  temperature: 0,
  logit_bias: noEos,
});

/** Prompt + max_tokens of `request(max)`, in tokens. */
async function spanOf(m: LoadedModel, max: number) {
  return m.tokenizer.encode(request(max).prompt).length + max;
}

describe("KV cache budget", () => {
  it("refuses a request whose cache alone exceeds the budget, naming max_tokens and both sizes", async () => {
    const engine = new Engine({ models: [dir], kvBudgetBytes: 2 ** 20 });
    const m = await engine.load();
    const fits = Math.floor(2 ** 20 / bytesPerToken) - m.tokenizer.encode(request(0).prompt).length;
    expect((await engine.generate(request(fits))).choices).toHaveLength(1);
    await expect(engine.generate(request(fits + 1))).rejects.toMatchObject({
      code: "invalid_request",
      param: "max_tokens",
      message: expect.stringMatching(/KV cache would take \d+ MiB .*budget of 1 MiB; lower max_tokens or n/),
    });
    // n rows count n times.
    await expect(engine.generate({ ...request(Math.ceil(fits / 2)), n: 2 })).rejects.toMatchObject({
      param: "max_tokens",
    });
    await engine.dispose();
  });

  it("runs requests one after another when two would not fit together, each as it would alone", async () => {
    const probe = new Engine({ models: [dir] });
    const span = await spanOf(await probe.load(), 40);
    const solo = (await probe.generate(request(40))).choices[0]!.text;
    await probe.dispose();

    for (const [budget, together] of [
      [1.5 * span * bytesPerToken, false],
      [2 * span * bytesPerToken, true],
    ] as const) {
      const engine = new Engine({ models: [dir], kvBudgetBytes: budget });
      const scheduler = await engine.scheduler();
      let most = 0;
      const watch = setInterval(() => (most = Math.max(most, scheduler.stats().running)), 1);
      const results = await Promise.all([engine.generate(request(40)), engine.generate(request(40))]);
      clearInterval(watch);
      expect(results.map((r) => r.choices[0]!.text)).toEqual([solo, solo]);
      expect(most).toBe(together ? 2 : 1);
      await engine.dispose();
    }
  });
});
