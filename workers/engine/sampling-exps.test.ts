// Draws at a temperature over the exps onnxruntime computes (sampling-exps.ts, drawFromExps):
// the same tokens as the sampler's own passes, bias, bans and the repetition penalty applied,
// rows independent of the rows beside them, and the engine's answers unchanged.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engine } from "./engine";
import { createPrng } from "./prng";
import {
  drawFromExps,
  drawsFromExps,
  ranksFromExps,
  sampleToken,
  type SampleContext,
  type SamplingParams,
} from "./sampler";
import { SamplingExps } from "./sampling-exps";
import { llamaModelDir, tinyModelDir } from "./testing/models";

const base: SamplingParams = { temperature: 1, topP: 1, tfs: 1, repetitionPenalty: 1, bias: new Map() };

/** Logits shaped like a model's: a bell-shaped bulk and a few tokens well above it (an LCG, fixed). */
function modelLike(vocab: number, seed: number): Float32Array {
  const out = new Float32Array(vocab);
  let s = seed >>> 0;
  const next = () => (s = (Math.imul(s, 1_664_525) + 1_013_904_223) >>> 0) / 2 ** 32;
  for (let i = 0; i < vocab; i++) out[i] = (next() + next() + next() - 1.5) * 3;
  for (let k = 0; k < 20; k++) out[Math.floor(next() * vocab)] += 6 + next() * 6;
  return out;
}

let exps: SamplingExps;
beforeAll(async () => {
  exps = await SamplingExps.create();
});
afterAll(() => exps.dispose());

describe("the exps session", () => {
  it("computes exp(logits / T − max) per row, each row as it is alone", async () => {
    const rows = [modelLike(5000, 1), modelLike(5000, 2), modelLike(5000, 3)];
    const temps = [0.7, 1, 1.6];
    // (A run's exps are valid until the next run: kept as copies here.)
    const copied = (rs: { exps: Float32Array; max: number }[]) => rs.map((r) => ({ ...r, exps: r.exps.slice() }));
    const together = copied(await exps.compute(rows, temps));
    for (let b = 0; b < rows.length; b++) {
      const scaled = Array.from(rows[b], (v) => Math.fround(v / Math.fround(temps[b])));
      const max = Math.max(...scaled);
      expect(together[b].max).toBe(max);
      for (let i = 0; i < 5000; i += 7)
        expect(Math.abs(together[b].exps[i] - Math.exp(scaled[i] - max))).toBeLessThan(1e-6);
      const alone = await exps.compute([rows[b]], [temps[b]]);
      expect(alone[0].max).toBe(together[b].max);
      expect(Array.from(alone[0].exps)).toEqual(Array.from(together[b].exps));
    }
  });

  it("writes a run's exps into one buffer kept from run to run, and its own for a run beside another", async () => {
    const rows = [modelLike(3000, 7), modelLike(3000, 8)];
    const first = await exps.compute(rows, [1, 1]);
    const second = await exps.compute(rows.slice(1), [1]);
    expect(second[0].exps.buffer).toBe(first[0].exps.buffer); // no new 4.9 MB per step at 8 × 152k
    const [a, b] = await Promise.all([exps.compute(rows, [1, 1]), exps.compute(rows, [1, 1])]);
    expect(a[0].exps.buffer).not.toBe(b[0].exps.buffer);
    expect(Array.from(a[1].exps)).toEqual(Array.from(b[1].exps));
  });

  it("takes rows that lie one after another in one buffer as they are", async () => {
    const buffer = new Float32Array(3 * 4000);
    buffer.set(modelLike(4000, 4), 0);
    buffer.set(modelLike(4000, 5), 4000);
    buffer.set(modelLike(4000, 6), 8000);
    const views = [0, 1, 2].map((b) => buffer.subarray(b * 4000, (b + 1) * 4000));
    const copies = views.map((v) => v.slice());
    const run = async (rs: Float32Array[]) =>
      (await exps.compute(rs, [0.9, 0.9])).map((r) => ({ exps: r.exps.slice() }));
    const fromViews = await run([views[2], views[1]]); // not in buffer order: copied
    const fromCopies = await run([copies[2], copies[1]]);
    const inOrder = await run(views.slice(1));
    expect(Array.from(fromViews[0].exps)).toEqual(Array.from(fromCopies[0].exps));
    expect(Array.from(inOrder[1].exps)).toEqual(Array.from(fromCopies[0].exps));
    expect(Array.from(inOrder[0].exps)).toEqual(Array.from(fromCopies[1].exps));
  });
});

describe("drawFromExps", () => {
  const draws = async (
    params: Partial<SamplingParams>,
    ctx: Partial<SampleContext> = {},
    vocab = 32_000,
    n = 400,
    ranked = false,
    rows = (k: number) => modelLike(vocab, 100 + (k % 8)),
  ) => {
    const p = { ...base, ...params };
    const ours: number[] = [];
    const theirs: number[] = [];
    const a = createPrng(11);
    const b = createPrng(11);
    for (let k = 0; k < n; k++) {
      const logits = rows(k);
      const [pre] = await exps.compute([logits], [p.temperature], ranked);
      expect(pre.top !== undefined).toBe(ranked);
      const before = pre.exps.slice();
      const c = { seen: [], banned: [], fallbackToken: 0, ...ctx };
      const got = drawFromExps(logits, pre, p, { ...c, prng: a });
      expect(got).not.toBeNull();
      const bytes = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
      expect(bytes(pre.exps).equals(bytes(before))).toBe(true); // left as it was
      ours.push(got!.id);
      theirs.push(sampleToken(logits, p, { ...c, prng: b }).id);
    }
    return { ours, theirs };
  };

  it("draws the tokens the sampler's own passes draw, at any temperature", async () => {
    for (const temperature of [0.3, 0.8, 1, 1.5]) {
      const { ours, theirs } = await draws({ temperature });
      expect(ours).toEqual(theirs);
      expect(new Set(ours).size).toBeGreaterThan(temperature < 0.5 ? 3 : 20); // draws, not an argmax
    }
  });

  it("applies logit_bias, bans, bad words and the repetition penalty as the sampler does", async () => {
    const top = modelLike(32_000, 100).reduce((best, v, i, l) => (v > l[best] ? i : best), 0);
    const bias = new Map([
      [top, -100],
      [5, 8],
      [6, -3],
    ]);
    const a = await draws({ temperature: 0.8, bias });
    expect(a.ours).toEqual(a.theirs);
    expect(a.ours).not.toContain(top);
    expect(a.ours.filter((t) => t === 5).length).toBeGreaterThan(0); // lifted into the head
    const seen = Array.from({ length: 300 }, (_, i) => i * 97);
    const b = await draws({ temperature: 0.9, repetitionPenalty: 1.5 }, { seen, banned: [[7, 8], [9]] });
    expect(b.ours).toEqual(b.theirs);
    for (const t of [7, 8, 9]) expect(b.ours).not.toContain(t);
  });

  it("leaves a draw to the sampler where float32 exps would not do", async () => {
    const logits = new Float32Array(1000).fill(0);
    logits[3] = 200; // every other exp underflows once token 3 is banned
    const [pre] = await exps.compute([logits], [1]);
    const ctx = { prng: createPrng(1), seen: [], banned: [], fallbackToken: 0 };
    expect(drawFromExps(logits, pre, { ...base, bias: new Map([[3, -100]]) }, ctx)).toBeNull();
    // A bias that lifts a token far above the row's max.
    const flat = new Float32Array(1000).fill(1);
    const [flatPre] = await exps.compute([flat], [0.5]);
    expect(drawFromExps(flat, flatPre, { ...base, temperature: 0.5, bias: new Map([[4, 90]]) }, ctx)).toBeNull();
    // Every token banned: sampleToken's fallback.
    const all = Array.from({ length: 1000 }, (_, i) => i);
    expect(drawFromExps(flat, flatPre, { ...base, temperature: 0.5 }, { ...ctx, banned: [all] })).toBeNull();
    // The same rows with nothing in the way are drawn here.
    expect(drawFromExps(flat, flatPre, { ...base, temperature: 0.5 }, ctx)).not.toBeNull();
  });

  it("draws the tokens the sampler's own passes draw with top_k and top_p", async () => {
    const settings: Partial<SamplingParams>[] = [
      { temperature: 0.7, topK: 1 },
      { temperature: 0.7, topK: 5 },
      { temperature: 1.2, topK: 40 },
      { temperature: 1, topK: 3000 },
      { temperature: 0.7, topP: 0.5 },
      { temperature: 0.9, topP: 0.9 },
      { temperature: 1.5, topP: 0.95 },
      { temperature: 0.7, topK: 50, topP: 0.95 },
      { temperature: 1.3, topK: 20, topP: 0.6 },
    ];
    // Over the exps alone, and with a ranked run's top (whose candidates are taken where they
    // lie within it: top_k 3000 and the nucleus at temperature 1.5 do not).
    for (const ranked of [false, true])
      for (const setting of settings) {
        const { ours, theirs } = await draws(setting, {}, 32_000, 200, ranked);
        expect(ours).toEqual(theirs);
        if (setting.topK !== 1) expect(new Set(ours).size).toBeGreaterThan(3); // draws, not an argmax
      }
    // A vocabulary of qwen 2.5's size, and the touched tokens: a bias lifting one above the
    // row's max, a ban of the max, the repetition penalty and bad words.
    for (const ranked of [false, true]) {
      const a = await draws({ temperature: 0.8, topP: 0.9 }, {}, 151_936, 100, ranked);
      expect(a.ours).toEqual(a.theirs);
    }
    const top = modelLike(32_000, 100).reduce((best, v, i, l) => (v > l[best] ? i : best), 0);
    const bias = new Map([
      [top, -100],
      [5, 14],
      [6, -3],
    ]);
    const seen = Array.from({ length: 300 }, (_, i) => i * 97);
    for (const setting of [{ topK: 8 }, { topP: 0.8 }, { topK: 30, topP: 0.9 }]) {
      const b = await draws(
        { temperature: 0.8, bias, repetitionPenalty: 1.3, ...setting },
        { seen, banned: [[7], [9]] },
      );
      expect(b.ours).toEqual(b.theirs);
      expect(b.ours).toContain(5);
      for (const t of [top, 7, 9]) expect(b.ours).not.toContain(t);
    }
  });

  it("orders equal exps by id, as the sampler does, with and without a ranked run", async () => {
    // Logits in steps of 0.5 (exact in float32, so tokens of a step tie), with a few lifted above
    // the rest: top_k and the nucleus cut through runs of equal tokens.
    const tied = (k: number) => {
      const l = Float32Array.from({ length: 4000 }, (_, i) => ((i * 7919 + k) % 9) * 0.5);
      for (let j = 0; j < 30; j++) l[(j * 131 + k) % 4000] = 6 + (j % 3);
      return l;
    };
    for (const ranked of [false, true])
      for (const setting of [{ topK: 5 }, { topK: 40 }, { topP: 0.3 }, { topK: 20, topP: 0.7 }, {}]) {
        const { ours, theirs } = await draws({ temperature: 0.6, ...setting }, {}, 4000, 200, ranked, tied);
        expect(ours).toEqual(theirs);
        expect(new Set(ours).size).toBeGreaterThan(3);
      }
  });

  it("is taken at a temperature, without tail-free sampling or logprobs", () => {
    expect(drawsFromExps({ ...base, temperature: 0.7 }, 100)).toBe(true);
    expect(drawsFromExps({ ...base, temperature: 0.7, topK: 100 }, 100)).toBe(true);
    expect(drawsFromExps({ ...base, topK: 40, topP: 0.9 }, 100)).toBe(true);
    expect(drawsFromExps({ ...base, temperature: 0 }, 100)).toBe(false);
    expect(drawsFromExps({ ...base, tfs: 0.95 }, 100)).toBe(false);
    expect(drawsFromExps({ ...base, logprobs: 2 }, 100)).toBe(false);
    // A ranked run's total and top only for rows that bias and the penalty leave alone.
    expect(ranksFromExps({ ...base, topP: 0.9 })).toBe(true);
    expect(ranksFromExps({ ...base, bias: new Map([[1, 2]]) })).toBe(false);
    expect(ranksFromExps({ ...base, repetitionPenalty: 1.1 })).toBe(false);
  });
});

describe("the engine", () => {
  const requests = [
    { prompt: "The dog sleeps in the", max_tokens: 24, seed: 1, temperature: 0.8 },
    { prompt: "Hello!", max_tokens: 20, seed: 3, temperature: 1, logit_bias: { "5": 4 } },
    { prompt: "Water boils at", max_tokens: 16, seed: 4, n: 3 },
    { prompt: "Once upon a time", max_tokens: 16, seed: 5, repetition_penalty: 1.3, top_k: 5 },
    { prompt: "The weather today", max_tokens: 18, temperature: 0 },
    { prompt: "The river", max_tokens: 16, seed: 6, temperature: 0.9, top_p: 0.9 },
    { prompt: "In the morning", max_tokens: 16, seed: 7, top_k: 20, top_p: 0.8 },
  ];

  for (const [name, dir] of [
    ["gpt2 (exact-length rows)", tinyModelDir],
    ["llama (padded rows)", llamaModelDir],
  ] as const)
    it(`${name}: answers as with the sampler's own exps, alone and batched`, async () => {
      const texts = async (samplingExps: boolean, together: boolean) => {
        const engine = new Engine({ models: [await dir()], samplingExps });
        const out = together
          ? await Promise.all(requests.map((r) => engine.generate(r)))
          : await requests.reduce<Promise<Awaited<ReturnType<Engine["generate"]>>[]>>(
              async (acc, r) => [...(await acc), await engine.generate(r)],
              Promise.resolve([]),
            );
        await engine.dispose();
        return out.map((r) => r.choices.map((c) => c.text));
      };
      const reference = await texts(false, false);
      expect(await texts(true, false)).toEqual(reference);
      expect(await texts(true, true)).toEqual(reference);
    });
});
