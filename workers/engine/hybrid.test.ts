// Hybrid models (LFM2-style: convolution layers with a fixed-size past_conv.N state between
// attention layers). layouts.test.ts checks greedy output against transformers.js generate(),
// alone and with 8 concurrent prompts of different lengths. Here: rows sharing a pass keep their
// own states as a row leaves (padded: rows of different lengths; exact-length: rows of one
// length), n choices, and long prompts: in chunks when the export carries its states from one
// chunk to the next (probed at load), in one pass when it does not.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engine } from "./engine";
import type { ModelRunner } from "./model/layouts/layout";
import { statesCarryAcrossChunks, zeroStates } from "./model/layouts/state-rows";
import type { LoadedModel } from "./model/load-model";
import { llamaLayoutDir } from "./testing/models";
import { referenceGreedy } from "./testing/reference";

const CANDIDATES = [
  "The dog sleeps",
  "The cat sleeps",
  "A dog runs",
  "The bird sings",
  "The man walks",
  "A cat eats",
  "The sun rises",
  "The boy reads",
  "Once upon a time there was a small village",
  "Good morning, everyone. Today we will talk about the river",
];

const argmax = (l: Float32Array) => l.reduce((best, v, i) => (v > l[best] ? i : best), 0);

/** A prompt of at least 300 tokens, its token count, and the input widths of the passes it runs. */
async function longPrompt(e: Engine, model: LoadedModel) {
  let prompt = "";
  while (model.tokenizer.encode(prompt).length < 300) prompt += "The bridge was built two hundred years ago. ";
  const run = model.session.run;
  const fed: number[] = [];
  model.session.run = async (feeds, fetches) => {
    fed.push(feeds.input_ids.dims[1]);
    return run.call(model.session, feeds, fetches);
  };
  try {
    const r = await e.generate({ prompt, max_tokens: 12, temperature: 0, logprobs: 1 });
    const ids = (r.choices[0].logprobs ?? []).map((l) => l.token_id);
    const ref = await referenceGreedy(model, prompt, 12);
    const eos = ref.findIndex((id) => model.info.eosTokenIds.includes(id));
    expect(ids).toEqual(eos >= 0 ? ref.slice(0, eos) : ref);
    return { S: model.tokenizer.encode(prompt).length, fed };
  } finally {
    model.session.run = run;
  }
}

describe.each([
  { variant: "hybrid" as const, layout: "padded", sameLength: false },
  { variant: "hybrid-no-position-ids" as const, layout: "exact-length", sameLength: true },
])("a hybrid model (past_conv states), $layout layout", ({ variant, layout, sameLength }) => {
  let engine: Engine;
  let m: LoadedModel;
  beforeAll(async () => {
    engine = new Engine({ models: [await llamaLayoutDir(variant)], loadOptions: () => ({ dtype: "fp32" }) });
    m = await engine.load();
  });
  afterAll(() => engine.dispose());

  it(`reads the states from the graph and serves it with the ${layout} layout`, () => {
    expect(m.info.layout).toBe(layout);
    const { states, kv } = m.info.graph;
    // Layer 0 is a convolution (its state: [hidden, CONV_L] per row), layer 1 attention.
    expect(states.map((s) => [s.past, s.present, s.dims, s.elems])).toEqual([
      ["past_conv.0", "present_conv.0", [128, 3], 384],
    ]);
    expect(kv.entries.map((e) => e.past)).toEqual(["past_key_values.1.key", "past_key_values.1.value"]);
  });

  it("rows sharing a pass keep their own states when a row leaves, each equal to its solo result", async () => {
    // Different texts, so different states: a state that moved to the wrong row when another
    // left would change that row's tokens. exact-length rows share a pass only at one length.
    const encoded = CANDIDATES.map((p) => m.tokenizer.encode(p));
    let prompts: number[][];
    if (sameLength) {
      const byLength = new Map<number, number[][]>();
      for (const ids of encoded) byLength.set(ids.length, [...(byLength.get(ids.length) ?? []), ids]);
      prompts = [...byLength.values()].sort((a, b) => b.length - a.length)[0].slice(0, 3);
    } else prompts = [encoded[0], encoded[8], encoded[9]];
    expect(prompts.length).toBe(3);
    expect(new Set(prompts.map((p) => p.length)).size).toBe(sameLength ? 1 : 3);
    const prefilled = [];
    for (const ids of prompts) prefilled.push(await m.runner.prefill(null, ids, 0, ids.length));
    const STEPS = 10;
    const solo: number[][] = [];
    for (const { state, logits } of prefilled) {
      const batch = m.runner.createBatch();
      batch.reshape([], [state]);
      const tokens = [argmax(logits)];
      for (let i = 0; i < STEPS; i++) tokens.push(argmax((await batch.step([tokens.at(-1)!]))[0]));
      solo.push(tokens);
    }
    expect(new Set(solo.map((t) => t.join())).size).toBe(3);

    const batch = m.runner.createBatch();
    batch.reshape(
      [],
      prefilled.map((p) => p.state),
    );
    const rows = [0, 1, 2];
    const got: number[][] = prefilled.map((p) => [argmax(p.logits)]);
    const passes = m.stats.forwardCalls;
    for (let i = 0; i < STEPS; i++) {
      if (i === 4) {
        // The middle row leaves: the last row takes its slot (as the scheduler orders it).
        batch.reshape([0, 2], []);
        rows.splice(1, 1);
      }
      const logits = await batch.step(rows.map((r) => got[r].at(-1)!));
      rows.forEach((r, slot) => got[r].push(argmax(logits[slot])));
    }
    expect(m.stats.forwardCalls - passes).toBe(STEPS); // one pass per step: the rows share it
    expect(got[0]).toEqual(solo[0]);
    expect(got[2]).toEqual(solo[2]);
    expect(got[1]).toEqual(solo[1].slice(0, 5));
  });

  it("n choices start from copies of the prompt's state: n = 3 greedy equals three solo runs", async () => {
    const prompt = CANDIDATES[8];
    const solo = (await engine.generate({ prompt, max_tokens: 12, temperature: 0 })).choices[0].text;
    const r = await engine.generate({ prompt, max_tokens: 12, temperature: 0, n: 3 });
    expect(r.choices.map((c) => c.text)).toEqual([solo, solo, solo]);
    // Sampled, the rows part ways: each choice is the one its seed gives alone (rows' states stay apart).
    const sampled = await engine.generate({ prompt, max_tokens: 12, temperature: 1, seed: 5, n: 3 });
    expect(new Set(sampled.choices.map((c) => c.text)).size).toBeGreaterThan(1);
    const again = await Promise.all([
      engine.generate({ prompt, max_tokens: 12, temperature: 1, seed: 5, n: 3 }),
      engine.generate({ prompt: CANDIDATES[9], max_tokens: 12, temperature: 1, seed: 9 }),
    ]);
    expect(again[0].choices.map((c) => c.text)).toEqual(sampled.choices.map((c) => c.text));
  });

  it("probes at load that its export carries the states from one prompt chunk to the next, and chunks long prompts", async () => {
    expect(m.info.chunkedPrefill).toBe(true);
    const { S, fed } = await longPrompt(engine, m);
    expect(fed.slice(0, 3)).toEqual([128, 128, S - 256]);
    expect(fed.slice(3).every((w) => w === 1)).toBe(true);
  });

  it("an export that drops incoming states fails the probe, and its prompts run in one pass", async () => {
    // As an export traced for a fresh sequence would: a chunk after the first starts from zero states.
    const dropping: ModelRunner = {
      ...m.runner,
      prefill: (state, ids, start, end) =>
        m.runner.prefill(state && { ...state, states: zeroStates(m.info.graph.states) }, ids, start, end),
    };
    expect(await statesCarryAcrossChunks(dropping, m.info.graph.states, m.info.vocabSize)).toBe(false);
    const model: LoadedModel = { ...m, runner: dropping, info: { ...m.info, chunkedPrefill: false } };
    const e = new Engine({ models: [m.dir], registry: { get: async () => model, dispose: async () => {} } as never });
    try {
      const { S, fed } = await longPrompt(e, model);
      expect(fed[0]).toBe(S);
      expect(fed.slice(1).every((w) => w === 1)).toBe(true);
    } finally {
      await e.dispose();
    }
  });
});

describe("a hybrid model's q8 file (activations quantized per tensor)", () => {
  it("fails the chunk probe, since chunking alone moves its logits as far as dropping the states, and runs prompts in one pass", async () => {
    const engine = new Engine({ models: [await llamaLayoutDir("hybrid")], loadOptions: () => ({ dtype: "q8" }) });
    try {
      const m = await engine.load();
      // Its rows share passes all the same, quantized row by row (model/row-quantization.ts).
      expect(m.info).toMatchObject({ layout: "padded", chunkedPrefill: false, graph: { rowsInteract: false } });
      // The deployment's status tells its operators.
      expect(m.info.servingNotes).toEqual([expect.stringMatching(/^Each prompt runs in one pass, not in chunks/)]);
      const { S, fed } = await longPrompt(engine, m);
      expect(fed[0]).toBe(S);
    } finally {
      await engine.dispose();
    }
  });
});
