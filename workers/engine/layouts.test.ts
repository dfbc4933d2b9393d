// Every graph layout and dtype real exports use, served batched: greedy output equals
// transformers.js generate() on the same file and dtype, alone and with 8 concurrent requests
// of different prompt lengths (each equal to its solo result).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engine } from "./engine";
import type { Dtype } from "./model/dtypes";
import type { LayoutName } from "./model/layouts/layout";
import type { LoadedModel } from "./model/load-model";
import { llamaDtypesDir, llamaLayoutDir, llamaModelDir, llamaQuantizedDir, tinyModelDir } from "./testing/models";
import { referenceGreedy } from "./testing/reference";

const PROMPTS = [
  "Hi",
  "The dog sleeps",
  "Once upon a time there was",
  "Hello! How are you today? I am",
  "Numbers like 1, 2, 3, 10 and 42",
  "She opened the door, looked outside, and smiled.",
  "The bridge was built two hundred years ago with stones from the hills, and",
  "Good morning, everyone. Today we will talk about the history of the river and the old bridge in our town.",
];

interface Case {
  name: string;
  dir: () => Promise<string>;
  dtype: Dtype;
  layout: LayoutName;
  /**
   * all: concurrent rows share passes (per-tensor quantized graphs too, quantized row by row:
   * model/row-quantization.ts); some: only rows of equal length do.
   */
  shares: "all" | "some";
}

const CASES: Case[] = [
  { name: "generated gpt2, fp32", dir: () => tinyModelDir(), dtype: "fp32", layout: "padded", shares: "all" },
  ...(["fp32", "fp16", "q8", "int8", "uint8", "q4", "q4f16"] as const).map((dtype) => ({
    name: `generated llama, ${dtype}`,
    dir: llamaDtypesDir,
    dtype,
    layout: "padded" as const,
    shares: "all" as const,
  })),
  {
    name: "llama without position_ids",
    dir: () => llamaLayoutDir("no-position-ids"),
    dtype: "fp32",
    layout: "exact-length",
    shares: "some",
  },
  {
    name: "llama, GroupQueryAttention",
    dir: () => llamaLayoutDir("gqa"),
    dtype: "fp32",
    layout: "gqa",
    shares: "all",
  },
  {
    name: "llama, external data in 2 files",
    dir: () => llamaLayoutDir("external-data"),
    dtype: "fp32",
    layout: "padded",
    shares: "all",
  },
  {
    // Row-wise quantization reads the weights' column sums from the external data files.
    name: "llama q8, external data in 2 files",
    dir: () => llamaLayoutDir("external-data"),
    dtype: "q8",
    layout: "padded",
    shares: "all",
  },
  {
    name: "llama q4, external data in 2 files",
    dir: () => llamaLayoutDir("external-data"),
    dtype: "q4",
    layout: "padded",
    shares: "all",
  },
  {
    name: "llama q4 with int8 compute (accuracy_level 4)",
    dir: () => llamaLayoutDir("q4-int8-compute"),
    dtype: "q4",
    layout: "padded",
    shares: "all",
  },
  ...(["q2", "q2f16"] as const).map((dtype) => ({
    name: `llama ${dtype} (2-bit MatMulNBits)`,
    dir: () => llamaLayoutDir("two-bit"),
    dtype,
    layout: "padded" as const,
    shares: "all" as const,
  })),
  {
    name: "llama, num_logits_to_keep + use_cache_branch",
    dir: () => llamaLayoutDir("extra-inputs"),
    dtype: "fp32",
    layout: "padded",
    shares: "all",
  },
  // Hybrid models: a past_conv.N state per convolution layer beside the attention layers' caches.
  ...(["fp32", "fp16", "q8", "q4"] as const).map((dtype) => ({
    name: `LFM2-style hybrid (past_conv states), ${dtype}`,
    dir: () => llamaLayoutDir("hybrid"),
    dtype,
    layout: "padded" as const,
    shares: "all" as const,
  })),
  {
    name: "LFM2-style hybrid without position_ids",
    dir: () => llamaLayoutDir("hybrid-no-position-ids"),
    dtype: "fp32",
    layout: "exact-length",
    shares: "some",
  },
  { name: "tiny-random-llama, fp32", dir: llamaModelDir, dtype: "fp32", layout: "padded", shares: "all" },
  {
    name: "tiny-random-llama, fp16 + external data",
    dir: llamaModelDir,
    dtype: "fp16",
    layout: "padded",
    shares: "all",
  },
  // Its fp32 graph quantized as transformers.js' quantize.py does (q8 takes uint8 weights here:
  // the graph has MultiHeadAttention). The export lists a few nodes before their inputs'
  // producers, which row-wise quantization's If branches must not.
  ...(["q8", "int8"] as const).map((dtype) => ({
    name: `tiny-random-llama, ${dtype} (quantized as transformers.js does)`,
    dir: () => llamaQuantizedDir(dtype),
    dtype,
    layout: "padded" as const,
    shares: "all" as const,
  })),
  // quantize.py --per_channel: a scale and a zero point per weight column.
  {
    name: "tiny-random-llama, uint8 per channel",
    dir: () => llamaQuantizedDir("uint8", true),
    dtype: "uint8",
    layout: "padded",
    shares: "all",
  },
];

const greedy = (engine: Engine, prompt: string, max_tokens: number) =>
  engine.generate({ prompt, max_tokens, temperature: 0, logprobs: 1 }).then((r) => ({
    ids: (r.choices[0].logprobs ?? []).map((l) => l.token_id),
    finish: r.choices[0].finish_reason,
  }));

/** The reference's new tokens as our engine reports them: EOS ends the text and is not a token. */
function expectedFrom(m: LoadedModel, ref: number[]) {
  const eos = ref.findIndex((id) => m.info.eosTokenIds.includes(id));
  return eos >= 0 ? { ids: ref.slice(0, eos), finish: "stop" } : { ids: ref, finish: "length" };
}

describe.each(CASES)("$name", ({ dir, dtype, layout, shares }) => {
  let engine: Engine;
  let m: LoadedModel;
  beforeAll(async () => {
    engine = new Engine({ models: [await dir()], loadOptions: () => ({ dtype }), prefillChunk: 512, kvReleaseMs: 50 });
    m = await engine.load();
  });
  afterAll(() => engine.dispose());

  it(`loads the ${dtype} graph with the ${layout} layout`, () => {
    expect(m.info).toMatchObject({ dtype, layout });
    // Operators are told when concurrent requests do not all share passes (a deployment's status).
    expect(m.info.servingNotes).toEqual([
      ...(shares === "all"
        ? []
        : ["Only concurrent requests at equal lengths share a pass: the graph takes no position_ids."]),
      // The hybrid's q8 file (../hybrid.test.ts): chunking alone moves its logits.
      ...(m.info.chunkedPrefill ? [] : [expect.stringMatching(/^Each prompt runs in one pass, not in chunks/)]),
    ]);
    // Graphs gain one new-column output per present (model/last-token-outputs.ts), so a decoding
    // step fetches the new token's keys and values, not the whole cache.
    const entries = m.info.graph.kv.entries;
    expect(entries.filter((e) => e.lastToken).length).toBe(entries.length);
  });

  it("computes a prompt's logits for its last position only", async () => {
    // model/last-token-outputs.ts slices the head's input (or the graph takes num_logits_to_keep).
    const run = m.session.run;
    const fed: number[][] = [];
    const dims: number[][] = [];
    m.session.run = async (feeds, fetches) => {
      const out = await run.call(m.session, feeds, fetches);
      fed.push([...feeds.input_ids.dims]);
      dims.push([...(out.logits ?? fetches.logits!).dims]);
      return out;
    };
    try {
      const prompt = PROMPTS[7];
      await engine.generate({ prompt, max_tokens: 1, temperature: 0 });
      // One pass of the whole prompt; a per-tensor quantized head is sliced after its quantizer.
      expect(fed).toEqual([[1, m.tokenizer.encode(prompt).length]]);
      expect(dims).toEqual([[1, 1, m.info.vocabSize]]);
    } finally {
      m.session.run = run;
    }
  });

  it("greedy equals transformers.js generate(), token for token", async () => {
    for (const prompt of PROMPTS.slice(1, 5)) {
      const ref = await referenceGreedy(m, prompt, 24);
      expect(ref.length).toBeGreaterThan(1);
      expect(await greedy(engine, prompt, 24), prompt).toEqual(expectedFrom(m, ref));
    }
  });

  it("8 concurrent requests of different prompt lengths each equal their solo result", async () => {
    const lengths = PROMPTS.map((p) => m.tokenizer.encode(p).length);
    expect(new Set(lengths).size).toBe(PROMPTS.length);
    let calls = m.stats.forwardCalls;
    const solo = [];
    for (const p of PROMPTS) solo.push(await greedy(engine, p, 16));
    const soloCalls = m.stats.forwardCalls - calls;
    calls = m.stats.forwardCalls;
    const together = await Promise.all(PROMPTS.map((p) => greedy(engine, p, 16)));
    const togetherCalls = m.stats.forwardCalls - calls;
    expect(together).toEqual(solo);
    for (const [i, p] of PROMPTS.entries())
      expect(solo[i], p).toEqual(expectedFrom(m, await referenceGreedy(m, p, 16)));
    if (shares === "all") expect(togetherCalls).toBeLessThan(soloCalls * 0.6);
    else expect(togetherCalls).toBeLessThanOrEqual(soloCalls);
    const scheduler = await engine.scheduler();
    await scheduler.whenIdle();
    expect(scheduler.stats()).toMatchObject({ running: 0 });
    await new Promise((r) => setTimeout(r, 100)); // past kvReleaseMs: the emptied batch's buffers go
    expect(scheduler.stats()).toMatchObject({ running: 0, kvBytes: 0 });
  });
});
