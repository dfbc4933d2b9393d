// The KV cache budget: requests wait rather than grow the batch's cache past it, and a request
// that alone would exceed it is refused with the figures.
import { beforeAll, describe, expect, it } from "vitest";
import { Engine } from "./engine";
import type { LoadedModel } from "./model/load-model";
import { llamaLayoutDir, tinyModelDir } from "./testing/models";

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

// The budget counts every row at the longest prompt + max_tokens. The layouts' buffers keep room
// to grow (columns, and rows to join) but never past the budget, even though nothing checks what
// they really hold when a request is admitted.
describe.each([
  { layout: "padded", dir: () => tinyModelDir() },
  { layout: "exact-length", dir: () => llamaLayoutDir("no-position-ids") },
  { layout: "gqa", dir: () => llamaLayoutDir("gqa") },
  { layout: "padded, with recurrent states", dir: () => llamaLayoutDir("hybrid") },
])("the $layout layout's buffers", ({ dir }) => {
  const max_tokens = 24;
  const prompts = Array.from({ length: 8 }, (_, i) => `The dog ${"very ".repeat(3 * i)}sleeps in the`);

  it("stay within a KV budget that just fits 8 requests, each answered as alone", async () => {
    const d = await dir();
    const probe = new Engine({ models: [d] });
    const m = await probe.load();
    const bias = Object.fromEntries(m.info.eosTokenIds.map((id) => [String(id), -100]));
    const req = (prompt: string) => ({ prompt, max_tokens, temperature: 0, logit_bias: bias });
    const solo = [];
    for (const p of prompts) solo.push((await probe.generate(req(p))).choices[0]!.text);
    const { kv, states } = m.info.graph;
    const perToken = kv.entries.length * kv.heads * kv.headDim * (kv.type === "float16" ? 2 : 4);
    const perRow = states.reduce((a, s) => a + 2 * s.elems * (s.type === "float16" ? 2 : 4), 0);
    const longest = Math.max(...prompts.map((p) => m.tokenizer.encode(p).length));
    await probe.dispose();

    const budget = prompts.length * ((longest + max_tokens) * perToken + perRow);
    const engine = new Engine({ models: [d], kvBudgetBytes: budget });
    const loaded = await engine.load();
    const scheduler = await engine.scheduler();
    // What the batch holds, read at every pass, and the most rows running at once.
    let held = 0;
    let most = 0;
    const run = loaded.session.run;
    loaded.session.run = (feeds, fetches) => {
      const s = scheduler.stats();
      held = Math.max(held, s.kvBytes);
      most = Math.max(most, s.running);
      return run.call(loaded.session, feeds, fetches);
    };
    const together = await Promise.all(prompts.map((p) => engine.generate(req(p))));
    expect(together.map((r) => r.choices[0]!.text)).toEqual(solo);
    expect(most).toBe(prompts.length);
    expect(held).toBeGreaterThan(budget / 2);
    expect(held).toBeLessThanOrEqual(budget);
    await engine.dispose();
  });
});
