// Distribution and exact tests of the sampler on synthetic logits (fixed seeds).
import { describe, expect, it } from "vitest";
import { createPrng } from "./prng";
import { expBelow, processLogits, sampleToken, type SamplingParams } from "./sampler";
import { drawFrom, fullSortNucleus } from "./testing/full-sort-sampler";

const base: SamplingParams = { temperature: 1, topP: 1, tfs: 1, repetitionPenalty: 1, bias: new Map() };
const logits = Float32Array.from([2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -2.0]);
const softmax = (l: ArrayLike<number>) => {
  const m = Math.max(...Array.from(l));
  const e = Array.from(l, (v) => Math.exp(v - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / s);
};

/** Empirical frequencies of 20k draws with one seeded PRNG. */
function frequencies(params: Partial<SamplingParams>, draws = 20_000, l = logits) {
  const prng = createPrng(7);
  const counts = new Array(l.length).fill(0);
  for (let i = 0; i < draws; i++)
    counts[sampleToken(l, { ...base, ...params }, { prng, seen: [], banned: [], fallbackToken: 0 }).id]++;
  return counts.map((c) => c / draws);
}

const expectClose = (got: number[], want: number[], tol = 0.015) =>
  got.forEach((g, i) => expect(Math.abs(g - want[i]), `token ${i}: ${g} vs ${want[i]}`).toBeLessThan(tol));

describe("sampler distributions", () => {
  it("temperature 1 draws from softmax(logits)", () => {
    expectClose(frequencies({}), softmax(logits));
  });

  it("temperature 0.5 draws from softmax(logits / 0.5)", () => {
    const want = softmax(Array.from(logits, (v) => v / 0.5));
    const got = frequencies({ temperature: 0.5 });
    expectClose(got, want);
    expect(Math.abs(got[0] - softmax(logits)[0])).toBeGreaterThan(0.1); // would fail if ignored
  });

  it("temperature 0 is greedy whatever the seed", () => {
    expect(frequencies({ temperature: 0 }, 500)[0]).toBe(1);
  });

  it("top_k keeps exactly the k most likely tokens, renormalized", () => {
    const p = softmax(logits).slice(0, 3);
    const s = p.reduce((a, b) => a + b, 0);
    expectClose(frequencies({ topK: 3 }), [...p.map((v) => v / s), 0, 0, 0, 0, 0]);
  });

  it("top_p keeps the smallest prefix whose mass reaches p", () => {
    const p = softmax(logits); // cumulative: 0.34, 0.55, 0.68, ...
    const keep = p.slice(0, 2);
    const s = keep.reduce((a, b) => a + b, 0);
    expect(p[0] + p[1]).toBeGreaterThan(0.5);
    expectClose(frequencies({ topP: 0.5 }), [keep[0] / s, keep[1] / s, 0, 0, 0, 0, 0, 0]);
  });

  it("tfs cuts the tail where the curvature mass exceeds z", () => {
    // A sharp head then a flat tail: second differences concentrate at the knee (after token 2).
    const l = Float32Array.from([3, 2.9, 2.8, -1, -1.05, -1.1, -1.15, -1.2]);
    const p = softmax(l);
    const d2 = [];
    for (let i = 0; i + 2 < p.length; i++) d2.push(Math.abs(p[i] - 2 * p[i + 1] + p[i + 2]));
    const total = d2.reduce((a, b) => a + b, 0);
    let cum = 0;
    let keep = p.length;
    for (let i = 0; i < d2.length; i++) {
      cum += d2[i] / total;
      if (cum > 0.5 && i >= 1) {
        keep = i;
        break;
      }
    }
    expect(keep).toBeGreaterThanOrEqual(2);
    expect(keep).toBeLessThan(p.length);
    const kept = p.slice(0, keep);
    const s = kept.reduce((a, b) => a + b, 0);
    const want = p.map((v, i) => (i < keep ? v / s : 0));
    const got = frequencies({ tfs: 0.5 }, 20_000, l);
    expectClose(got, want);
    expect(got.slice(keep).every((f) => f === 0)).toBe(true);
  });

  it("the same seed reproduces the same draws; another seed differs", () => {
    const run = (seed: number) => {
      const prng = createPrng(seed);
      return Array.from(
        { length: 50 },
        () => sampleToken(logits, base, { prng, seen: [], banned: [], fallbackToken: 0 }).id,
      );
    };
    expect(run(3)).toEqual(run(3));
    expect(run(3)).not.toEqual(run(4));
  });
});

describe("logits processing (exact)", () => {
  it("logit_bias adds to the logit; -100 bans", () => {
    const out = processLogits(
      logits,
      {
        ...base,
        bias: new Map([
          [7, 5],
          [0, -100],
        ]),
      },
      { prng: createPrng(1), seen: [], banned: [], fallbackToken: 0 },
    );
    expect(out[7]).toBeCloseTo(3);
    expect(out[0]).toBe(-Infinity);
    expect(out[1]).toBeCloseTo(1.5);
  });

  it("repetition_penalty divides positive and multiplies negative logits of seen tokens", () => {
    const out = processLogits(
      logits,
      { ...base, repetitionPenalty: 2 },
      { prng: createPrng(1), seen: [0, 6, 6], banned: [], fallbackToken: 0 },
    );
    expect(out[0]).toBeCloseTo(1.0);
    expect(out[6]).toBeCloseTo(-2.0);
    expect(out[1]).toBeCloseTo(1.5);
  });

  it("banned tokens are never drawn; all banned falls back", () => {
    const got = frequencies({}, 2000);
    expect(got[0]).toBeGreaterThan(0);
    const prng = createPrng(1);
    for (let i = 0; i < 2000; i++)
      expect(sampleToken(logits, base, { prng, seen: [], banned: [[0, 1]], fallbackToken: 0 }).id).toBeGreaterThan(1);
    const all = [Array.from({ length: 8 }, (_, i) => i)];
    expect(sampleToken(logits, base, { prng, seen: [], banned: all, fallbackToken: 5 }).id).toBe(5);
  });

  it("logprobs: top-N of the processed distribution, most likely first, mass <= 1", () => {
    const r = sampleToken(
      logits,
      { ...base, temperature: 0.7, logprobs: 3 },
      { prng: createPrng(2), seen: [], banned: [], fallbackToken: 0 },
    );
    const p = softmax(Array.from(logits, (v) => v / 0.7));
    expect(r.top!.map((t) => t.id)).toEqual([0, 1, 2]);
    r.top!.forEach((t) => expect(Math.exp(t.logprob)).toBeCloseTo(p[t.id], 5));
    expect(r.top!.reduce((a, t) => a + Math.exp(t.logprob), 0)).toBeLessThanOrEqual(1);
    expect(Math.exp(r.logprob)).toBeCloseTo(p[r.id], 5);
  });
});

describe("+Inf logits (a float16 graph that overflowed)", () => {
  it("put the whole mass on the +Inf tokens, evenly, with or without truncation", () => {
    const given = [2, Infinity, 1, Infinity, 0, -1, 3, 0.5];
    const l = Float32Array.from(given);
    for (const params of [{}, { topP: 0.9 }, { topK: 3 }, { tfs: 0.5 }, { temperature: 0.5 }]) {
      const f = frequencies(params, 4000, l);
      // The caller's logits are left as they were (a prompt cache keeps them for the next request).
      expect([...l], JSON.stringify(params)).toEqual(given);
      // Before: NaN probabilities, and the draw's leftover token (id 0, or the least likely).
      expect(f[1]! + f[3]!, JSON.stringify(params)).toBe(1);
      expect(Math.abs(f[1]! - 0.5), JSON.stringify(params)).toBeLessThan(0.05);
    }
    const prng = createPrng(1);
    const r = sampleToken(l, { ...base, logprobs: 2 }, { prng, seen: [], banned: [], fallbackToken: 0 });
    expect([1, 3]).toContain(r.id);
    expect(r.logprob).toBeCloseTo(Math.log(0.5), 6);
  });
});

describe("logprobs with truncation", () => {
  it("stay those of the whole vocabulary whatever top_p or top_k keep", () => {
    const p = softmax(Array.from(logits, (v) => v / 0.9));
    for (const truncation of [{ topP: 0.5 }, { topK: 2 }, { topK: 3, topP: 0.6 }, {}]) {
      const prng = createPrng(4);
      for (let i = 0; i < 20; i++) {
        const r = sampleToken(
          logits,
          { ...base, temperature: 0.9, logprobs: 3, ...truncation },
          { prng, seen: [], banned: [], fallbackToken: 0 },
        );
        expect(r.top!.map((t) => t.id)).toEqual([0, 1, 2]);
        r.top!.forEach((t) => expect(Math.exp(t.logprob)).toBeCloseTo(p[t.id], 6));
        expect(Math.exp(r.logprob)).toBeCloseTo(p[r.id], 6);
      }
    }
  });
});

describe("greedy choice with bias, bans and the repetition penalty", () => {
  const argmax = (l: Float32Array) => l.reduce((best, v, i) => (v > l[best] ? i : best), 0);

  it("applies bias, bans and the repetition penalty, and leaves the logits as they were", () => {
    const raw = Float32Array.from([2.0, 1.9, 1.8, 1.7, 1.6]);
    const before = Float32Array.from(raw);
    const prng = createPrng(1);
    const pick = (params: Partial<SamplingParams>, banned: number[][] = [], seen: number[] = []) =>
      sampleToken(raw, { ...base, temperature: 0, ...params }, { prng, seen, banned, fallbackToken: 99 }).id;
    expect(pick({})).toBe(0);
    expect(pick({ bias: new Map([[0, -100]]) })).toBe(1);
    expect(pick({ bias: new Map([[4, 0.5]]) })).toBe(4);
    expect(pick({}, [[0, 1]])).toBe(2);
    expect(pick({ repetitionPenalty: 2 }, [], [0, 1])).toBe(2); // 2.0 → 1.0, 1.9 → 0.95
    expect(pick({ bias: new Map([[0, 1]]), repetitionPenalty: 4 }, [], [0])).toBe(1); // (2 + 1) / 4
    expect(pick({ bias: new Map([0, 1, 2, 3, 4].map((id) => [id, -100])) })).toBe(99); // all banned: fallback
    expect(raw).toEqual(before);
  });

  it("chooses what the copying path (processLogits, then argmax) chooses", () => {
    const prng = createPrng(3);
    for (let trial = 0; trial < 200; trial++) {
      const raw = Float32Array.from({ length: 64 }, () => Math.round(prng.next() * 20) / 4 - 2); // ties too
      const bias = new Map<number, number>();
      for (let i = 0; i < 3; i++) bias.set(Math.floor(prng.next() * 64), [-100, -1, 2][i]);
      const banned = [[Math.floor(prng.next() * 64)]];
      const seen = Array.from({ length: 5 }, () => Math.floor(prng.next() * 64));
      const params = { ...base, temperature: 0, bias, repetitionPenalty: trial % 2 ? 1.3 : 1 };
      const ctx = { prng, seen, banned, fallbackToken: 0 };
      const want = argmax(processLogits(raw, params, ctx));
      const copy = Float32Array.from(raw);
      expect(sampleToken(raw, params, ctx).id).toBe(want);
      expect(raw).toEqual(copy);
    }
  });
});

describe("truncation over a real-sized vocabulary", () => {
  /** 50k logits as a model gives them: a bell-shaped bulk, a few strong tokens, ties, bans, extremes. */
  function vocabulary(seed: number): Float32Array {
    const prng = createPrng(seed);
    const l = Float32Array.from({ length: 50_000 }, () => {
      let g = 0;
      for (let k = 0; k < 6; k++) g += prng.next();
      return Math.round((g - 3) * 40) / 16; // quantized: many exact ties
    });
    for (let i = 0; i < 30; i++) l[Math.floor(prng.next() * l.length)] += 4 + prng.next() * 6;
    for (let i = 0; i < 100; i++) l[Math.floor(prng.next() * l.length)] = -Infinity;
    l[7] = -1e30;
    l[8] = -3e38;
    return l;
  }

  const cases: [string, Partial<SamplingParams>][] = [
    ["top_p 0.9", { topP: 0.9 }],
    ["top_p 0.8, temperature 1.5", { topP: 0.8, temperature: 1.5 }],
    ["top_p 0.999, temperature 2", { topP: 0.999, temperature: 2 }],
    ["top_k 40", { topK: 40 }],
    ["top_k 1000", { topK: 1000 }],
    ["top_k 50 and top_p 0.95", { topK: 50, topP: 0.95 }],
  ];
  for (const [name, params] of cases) {
    it(`${name}: every draw is the full sort's`, () => {
      for (const seed of [1, 2]) {
        const raw = vocabulary(seed);
        const p = { ...base, ...params };
        const scaled = processLogits(raw, p, { prng: createPrng(0), seen: [], banned: [], fallbackToken: 0 });
        const nucleus = fullSortNucleus(scaled, p);
        const ours = createPrng(seed + 10);
        const theirs = createPrng(seed + 10);
        const drawn = new Set<number>();
        for (let i = 0; i < 150; i++) {
          const id = sampleToken(raw, p, { prng: ours, seen: [], banned: [], fallbackToken: 0 }).id;
          expect(id).toBe(drawFrom(nucleus, theirs.next()));
          drawn.add(id);
        }
        expect(drawn.size).toBeGreaterThan(1); // the cases draw from more than one token
      }
    });
  }

  it("top_k keeps the lower ids among tokens tied at the cut", () => {
    const l = new Float32Array(40_000).fill(0);
    l[30_000] = 1;
    const seen = new Set<number>();
    const prng = createPrng(5);
    for (let i = 0; i < 2000; i++)
      seen.add(sampleToken(l, { ...base, topK: 4 }, { prng, seen: [], banned: [], fallbackToken: 0 }).id);
    expect([...seen].sort((a, b) => a - b)).toEqual([0, 1, 2, 30_000]);
  });
});

describe("expBelow", () => {
  it("is Math.exp within 1e-8 over the whole range below zero, exactly 1 at 0, 0 at −∞", () => {
    let worst = 0;
    for (let x = -745; x <= 0; x += 0.0137) {
      const want = Math.exp(x);
      if (want > 1e-300) worst = Math.max(worst, Math.abs(expBelow(x) / want - 1));
    }
    expect(worst).toBeLessThan(1e-8);
    expect(expBelow(0)).toBe(1);
    expect(expBelow(-Infinity)).toBe(0);
    expect(expBelow(-1e6)).toBe(0);
    expect(expBelow(-700)).toBeGreaterThan(0);
  });
});
