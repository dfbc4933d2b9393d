// Each sampling parameter through the whole engine on the generated tiny model.
import { beforeAll, describe, expect, it } from "vitest";
import { Engine } from "./engine";
import type { LoadedModel } from "./model/load-model";
import { tinyModelDir } from "./testing/models";

let engine: Engine;
let model: LoadedModel;
beforeAll(async () => {
  engine = new Engine({ models: [await tinyModelDir()] });
  model = await engine.load();
});

const prompt = "The children played in the";
const gen = (req: Record<string, unknown>) => engine.generate({ prompt, max_tokens: 12, ...req });
const ids = (r: Awaited<ReturnType<typeof gen>>, i = 0) => (r.choices[i].logprobs ?? []).map((l) => l.token_id);

describe("sampling parameters through the engine", () => {
  it("temperature scales the reported distribution exactly (log-odds divided by T)", async () => {
    const a = (await gen({ max_tokens: 1, temperature: 1, logprobs: 5, seed: 1 })).choices[0].logprobs![0].top_logprobs;
    const b = (await gen({ max_tokens: 1, temperature: 0.5, logprobs: 5, seed: 1 })).choices[0].logprobs![0]
      .top_logprobs;
    expect(b.map((t) => t.token_id)).toEqual(a.map((t) => t.token_id));
    for (let i = 1; i < 5; i++) expect(b[0].logprob - b[i].logprob).toBeCloseTo((a[0].logprob - a[i].logprob) / 0.5, 3);
  });

  it("top_k: every chosen token is among the k most likely of its step", async () => {
    let outsideTop1 = 0;
    for (let seed = 0; seed < 8; seed++) {
      const r = await gen({ top_k: 3, logprobs: 5, seed, max_tokens: 16 });
      for (const step of r.choices[0].logprobs!) {
        const rank = step.top_logprobs.findIndex((t) => t.token_id === step.token_id);
        expect(rank).toBeGreaterThanOrEqual(0);
        expect(rank).toBeLessThan(3);
        if (rank > 0) outsideTop1++;
      }
    }
    expect(outsideTop1).toBeGreaterThan(0); // it samples, it is not greedy
  });

  it("a temperature too small to divide by (1e-39) is greedy", async () => {
    const greedy = await gen({ temperature: 0, logprobs: 1 });
    // Before: the logits divided by it overflowed to +Inf, and tokens were drawn from NaN.
    for (const seed of [1, 2]) expect(ids(await gen({ temperature: 1e-39, seed, logprobs: 1 }))).toEqual(ids(greedy));
  });

  it("top_k = 1 is greedy", async () => {
    const greedy = await gen({ temperature: 0, logprobs: 1 });
    for (const seed of [1, 2, 3]) expect(ids(await gen({ top_k: 1, seed, logprobs: 1 }))).toEqual(ids(greedy));
  });

  it("top_p: the mass ranked above each chosen token is below p", async () => {
    let checked = 0;
    let sampledBelowTop1 = 0;
    for (let seed = 0; seed < 8; seed++) {
      const r = await gen({ top_p: 0.15, logprobs: 5, seed, max_tokens: 16 });
      for (const step of r.choices[0].logprobs!) {
        const rank = step.top_logprobs.findIndex((t) => t.token_id === step.token_id);
        const above = step.top_logprobs.slice(0, rank < 0 ? 5 : rank).reduce((a, t) => a + Math.exp(t.logprob), 0);
        expect(above).toBeLessThan(0.15 + 1e-6);
        if (rank !== 0) sampledBelowTop1++;
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(50);
    expect(sampledBelowTop1).toBeGreaterThan(0);
  });

  it("tfs changes what is sampled and never picks beyond the kept head", async () => {
    let differs = 0;
    for (let seed = 0; seed < 6; seed++) {
      const plain = await gen({ seed, logprobs: 5 });
      const cut = await gen({ seed, tfs: 0.2, logprobs: 5 });
      if (plain.choices[0].text !== cut.choices[0].text) differs++;
      for (const step of cut.choices[0].logprobs!)
        expect(step.top_logprobs.findIndex((t) => t.token_id === step.token_id)).toBeGreaterThanOrEqual(0);
    }
    expect(differs).toBeGreaterThan(2);
  });

  it("repetition_penalty steers greedy decoding away from repeats", async () => {
    const count = (xs: number[]) => xs.length - new Set(xs).size;
    const plain = ids(await gen({ temperature: 0, max_tokens: 24, logprobs: 1 }));
    const penalized = ids(await gen({ temperature: 0, max_tokens: 24, logprobs: 1, repetition_penalty: 3 }));
    expect(count(plain)).toBeGreaterThan(5);
    expect(count(penalized)).toBeLessThan(count(plain));
  });

  it("logit_bias by token id forces that token; -100 bans the greedy choice", async () => {
    const forced = await gen({ logit_bias: { "260": 100 }, seed: 3, logprobs: 1 });
    expect(ids(forced).every((id) => id === 260)).toBe(true);
    const greedy = ids(await gen({ temperature: 0, logprobs: 1 }));
    const banned = ids(await gen({ temperature: 0, logprobs: 1, logit_bias: { [String(greedy[0])]: -100 } }));
    expect(banned[0]).not.toBe(greedy[0]);
    expect(banned).not.toContain(greedy[0]);
  });

  it("logit_bias by string means the string's first token", async () => {
    const first = model.tokenizer.encode(" garden is", { add_special_tokens: false })[0];
    const r = await gen({ logit_bias: { " garden is": 100 }, seed: 5, logprobs: 1, max_tokens: 4 });
    expect(ids(r)).toEqual([first, first, first, first]);
  });

  it("logprobs: N alternatives, most likely first, mass <= 1, the chosen token's own logprob", async () => {
    const r = await gen({ logprobs: 3, seed: 9 });
    const steps = r.choices[0].logprobs!;
    expect(steps.length).toBe(r.usage.completion_tokens);
    for (const s of steps) {
      expect(s.top_logprobs).toHaveLength(3);
      const mass = s.top_logprobs.reduce((a, t) => a + Math.exp(t.logprob), 0);
      expect(mass).toBeLessThanOrEqual(1 + 1e-9);
      expect(s.top_logprobs[0].logprob).toBeGreaterThanOrEqual(s.top_logprobs[2].logprob);
      const same = s.top_logprobs.find((t) => t.token_id === s.token_id);
      if (same) expect(same.logprob).toBeCloseTo(s.logprob, 6);
      expect(s.logprob).toBeLessThanOrEqual(0);
    }
    await expect(gen({ logprobs: 6 })).rejects.toMatchObject({ code: "invalid_request", param: "logprobs" });
  });

  it("echo puts the prompt before the completion", async () => {
    const plain = await gen({ seed: 4 });
    const echoed = await gen({ seed: 4, echo: true });
    expect(echoed.choices[0].text).toBe(prompt + plain.choices[0].text);
  });

  it("n: independent completions from one prompt pass", async () => {
    const before = model.stats.forwardCalls;
    const r = await gen({ n: 4, seed: 11, max_tokens: 6 });
    const calls = model.stats.forwardCalls - before;
    expect(r.choices).toHaveLength(4);
    expect(new Set(r.choices.map((c) => c.text)).size).toBeGreaterThan(1);
    expect(calls).toBeLessThanOrEqual(6); // one prompt pass + at most 5 shared decode steps
    expect(r.usage.prompt_tokens).toBe(model.tokenizer.encode(prompt).length);
  });

  it("seed reproduces; different seeds differ", async () => {
    const a = await gen({ seed: 21, max_tokens: 20 });
    expect((await gen({ seed: 21, max_tokens: 20 })).choices[0].text).toBe(a.choices[0].text);
    expect((await gen({ seed: 22, max_tokens: 20 })).choices[0].text).not.toBe(a.choices[0].text);
  });
});

describe("request checks before any work", () => {
  it("prompt tokens + max_tokens above the model's context: error names both numbers", async () => {
    const before = model.stats.forwardCalls;
    const n = model.tokenizer.encode(prompt).length;
    const err = await gen({ max_tokens: 1024 }).catch((e) => e);
    expect(err).toMatchObject({ code: "context_length_exceeded" });
    expect(err.message).toContain(String(n + 1024));
    expect(err.message).toContain("1024");
    expect(model.stats.forwardCalls).toBe(before);
  });

  it("rejects out-of-range parameters with invalid_request and the param", async () => {
    for (const [param, value] of [
      ["top_k", 0],
      ["top_k", 50_401],
      ["repetition_penalty", 0.5],
      ["tfs", 1.5],
      ["temperature", -1],
      ["n", 0],
    ] as const) {
      await expect(gen({ [param]: value })).rejects.toMatchObject({ code: "invalid_request", param });
    }
    await expect(gen({ logit_bias: { "999999": 1 } })).rejects.toMatchObject({
      code: "invalid_request",
      param: "logit_bias",
    });
  });
});
