// Continuous batching, cancellation and the bounded queue.
import { beforeAll, describe, expect, it } from "vitest";
import { Engine } from "./engine";
import type { LoadedModel } from "./model/load-model";
import { llamaDtypesDir, llamaLayoutDir, llamaModelDir, tinyModelDir } from "./testing/models";

let dir: string;
beforeAll(async () => {
  dir = await tinyModelDir();
});

const requests = [
  { prompt: "The dog sleeps in the", max_tokens: 20, seed: 1 },
  { prompt: "Once upon a time there was a small village", max_tokens: 12, seed: 2, top_k: 5 },
  { prompt: "Hello!", max_tokens: 25, seed: 3, temperature: 0.7 },
  { prompt: "Water boils at", max_tokens: 16, seed: 4, n: 2 },
  { prompt: "The weather today", max_tokens: 18, temperature: 0 },
];

describe("continuous batching", () => {
  it("concurrent requests share forward passes and equal sequential runs", async () => {
    const engine = new Engine({ models: [dir] });
    const m: LoadedModel = await engine.load();
    let start = m.stats.forwardCalls;
    const sequential = [];
    for (const r of requests) sequential.push(await engine.generate(r));
    const sequentialCalls = m.stats.forwardCalls - start;

    start = m.stats.forwardCalls;
    const concurrent = await Promise.all(requests.map((r) => engine.generate(r)));
    const concurrentCalls = m.stats.forwardCalls - start;

    expect(concurrent.map((r) => r.choices.map((c) => c.text))).toEqual(
      sequential.map((r) => r.choices.map((c) => c.text)),
    );
    expect(concurrentCalls).toBeLessThan(sequentialCalls * 0.6);
    const scheduler = await engine.scheduler();
    await scheduler.whenIdle();
    expect(scheduler.stats()).toMatchObject({ running: 0, queued: 0 });
  });

  it("an emptied batch keeps its KV buffers for the next requests, then gives them back", async () => {
    const engine = new Engine({ models: [dir], kvReleaseMs: 400 });
    const scheduler = await engine.scheduler();
    const texts = async () =>
      (await Promise.all(requests.map((r) => engine.generate(r)))).map((r) => r.choices[0].text);
    const first = await texts();
    await scheduler.whenIdle();
    const held = scheduler.stats();
    expect(held).toMatchObject({ running: 0 });
    expect(held.kvBytes).toBeGreaterThan(0);
    expect(held.kvAllocations).toBeGreaterThan(0);
    // The same requests again: their rows fit the room kept, so no buffer is allocated, and the
    // stale keys and values left in it change nothing.
    expect(await texts()).toEqual(first);
    await scheduler.whenIdle();
    expect(scheduler.stats()).toMatchObject({ kvBytes: held.kvBytes, kvAllocations: held.kvAllocations });
    await new Promise((r) => setTimeout(r, 600));
    expect(scheduler.stats()).toMatchObject({ running: 0, kvBytes: 0 });
    // A batch after the release starts from nothing and still answers the same.
    expect(await texts()).toEqual(first);
  });

  it("llama (no kv_delta outputs, padded rows): batched results equal sequential ones", async () => {
    const engine = new Engine({ models: [await llamaModelDir()] });
    const reqs = [
      { prompt: "Hello world", max_tokens: 10, temperature: 0 },
      { prompt: "A much longer prompt than the first one, with more tokens", max_tokens: 14, temperature: 0 },
      { prompt: "Third", max_tokens: 8, seed: 3 },
    ];
    const sequential = [];
    for (const r of reqs) sequential.push((await engine.generate(r)).choices[0].text);
    const concurrent = await Promise.all(reqs.map((r) => engine.generate(r)));
    expect(concurrent.map((r) => r.choices[0].text)).toEqual(sequential);
  });

  it("a request joins a running batch and leaves without waiting for the others", async () => {
    const engine = new Engine({ models: [dir] });
    const long = engine.generate({ prompt: "The city was quiet", max_tokens: 120, seed: 1 });
    let longDone = false;
    void long.then(() => (longDone = true));
    await new Promise((r) => setTimeout(r, 30));
    const short = await engine.generate({ prompt: "Hello", max_tokens: 4, seed: 2 });
    expect(short.choices[0].finish_reason).toBe("length");
    expect(longDone).toBe(false);
    expect((await long).usage.completion_tokens).toBe(120);
  });
});

describe("prefill and decode", () => {
  it("a request arriving while rows decode is prefilled right after the pass in progress", async () => {
    // Passes alternate while both wait (after a prefill chunk, a decode step), but a prompt that
    // arrives while only decoding goes on is next: it never waits for a second decode step.
    const engine = new Engine({ models: [dir] });
    const scheduler = await engine.scheduler();
    const m = scheduler.model;
    const noEos = { [String(m.info.eosTokenIds[0])]: -100 };
    const running = Array.from({ length: 4 }, (_, i) =>
      engine.generate({ prompt: `Row ${i}`, max_tokens: 900, seed: i, logit_bias: noEos }),
    );
    await expect.poll(() => scheduler.stats().running, { interval: 1, timeout: 30_000 }).toBe(4);
    for (let probe = 0; probe < 8; probe++) {
      // Several decode steps after the last probe's prefill, at a different point each time.
      await new Promise((r) => setTimeout(r, 15 + probe * 3));
      expect(scheduler.stats().running).toBe(4);
      const submittedAt = m.stats.forwardCalls; // the pass in progress, if one is, is counted
      let firstTokenAt = -1;
      // A prompt of its own each time (the prompt cache would answer a repeated one without a pass).
      const prompt = `Hello there, probe ${probe}`;
      for await (const e of await engine.start({ prompt, max_tokens: 1, temperature: 0 }))
        if (e.type === "delta" && firstTokenAt < 0) firstTokenAt = m.stats.forwardCalls;
      expect(firstTokenAt - submittedAt, `probe ${probe}`).toBe(1); // its prompt's pass, nothing before
    }
    for (const r of running) expect((await r).usage.completion_tokens).toBe(900);
  });
});

describe("steps of several passes", () => {
  it("a request arriving mid-step is prefilled between two passes, not after all of them", async () => {
    // q8 as the file is (activations quantized per tensor, without the engine's row-wise
    // rewrite): every row runs a pass of its own, so a step of 6 rows is 6 passes. A new
    // request's prompt runs after the pass in progress.
    const loadOptions = () => ({ dtype: "q8" as const, rowWiseQuantization: false });
    const engine = new Engine({ models: [await llamaDtypesDir()], loadOptions });
    const scheduler = await engine.scheduler();
    const m = scheduler.model;
    expect(m.info.layout).toBe("exact-length");
    expect(m.info.servingNotes).toEqual([
      "Concurrent requests run one pass each: row-wise quantization is off (WORKER_ROW_QUANTIZATION=off).",
    ]);
    const noEos = { [String(m.info.eosTokenIds[0])]: -100 };
    const running = Array.from({ length: 6 }, (_, i) =>
      engine.generate({ prompt: `Row ${i}`, max_tokens: 400, seed: i, logit_bias: noEos }),
    );
    await expect.poll(() => scheduler.stats().running, { interval: 1, timeout: 30_000 }).toBe(6);
    const solo = await new Engine({ models: [await llamaDtypesDir()], loadOptions }).generate({
      prompt: "Hello there",
      max_tokens: 3,
      temperature: 0,
    });
    for (let probe = 0; probe < 4; probe++) {
      // Somewhere inside a step, a different place each time.
      await new Promise((r) => setTimeout(r, 3 + probe * 7));
      const submittedAt = m.stats.forwardCalls;
      let firstTokenAt = -1;
      let text = "";
      for await (const e of await engine.start({ prompt: "Hello there", max_tokens: 3, temperature: 0 }))
        if (e.type === "delta") {
          if (firstTokenAt < 0) firstTokenAt = m.stats.forwardCalls;
          text += e.text;
        }
      // The pass in progress, then its prompt's pass (waiting for the step's 6 passes, and the
      // next step when decoding came first, took up to 12).
      expect(firstTokenAt - submittedAt).toBeLessThanOrEqual(2);
      expect(text).toBe(solo.choices[0].text);
    }
    for (const r of running) expect((await r).usage.completion_tokens).toBe(400);
  });
});

describe("cancellation", () => {
  it("an aborted request leaves the batch at the next step and frees its cache", async () => {
    const engine = new Engine({ models: [dir] });
    const scheduler = await engine.scheduler();
    const m = scheduler.model;
    const controller = new AbortController();
    const other = engine.generate({ prompt: "Good morning, everyone.", max_tokens: 60, seed: 8 });
    const deltas: string[] = [];
    const consume = (async () => {
      const noEos = { [String(m.info.eosTokenIds[0])]: -100 }; // so only cancellation can end it early
      for await (const d of engine.streamText(
        { prompt: "The cat looked at the sea", max_tokens: 1000, seed: 1, logit_bias: noEos },
        { signal: controller.signal },
      )) {
        deltas.push(d);
        if (deltas.length === 5) controller.abort();
      }
    })();
    await expect(consume).rejects.toMatchObject({ name: "AbortError" });
    const callsAtAbort = m.stats.forwardCalls;
    const otherText = (await other).choices[0].text;
    await scheduler.whenIdle();
    // Had the cancelled stream stayed in the batch, the loop would have run to 1000 tokens.
    expect(m.stats.forwardCalls - callsAtAbort).toBeLessThan(80);
    const solo = await new Engine({ models: [dir] }).generate({
      prompt: "Good morning, everyone.",
      max_tokens: 60,
      seed: 8,
    });
    expect(otherText).toBe(solo.choices[0].text);
    expect(scheduler.stats()).toMatchObject({ running: 0 });
  });

  it("breaking out of the stream cancels too", async () => {
    const engine = new Engine({ models: [dir] });
    const scheduler = await engine.scheduler();
    const noEos = { [String(scheduler.model.info.eosTokenIds[0])]: -100 };
    for await (const e of await engine.start({ prompt: "Hello", max_tokens: 1000, seed: 1, logit_bias: noEos }))
      if (e.type === "delta") break;
    const calls = scheduler.model.stats.forwardCalls;
    await new Promise((r) => setTimeout(r, 50));
    expect(scheduler.model.stats.forwardCalls - calls).toBeLessThanOrEqual(1);
    expect(scheduler.stats()).toMatchObject({ running: 0, queued: 0 });
  });

  it("an already aborted signal is refused", async () => {
    const engine = new Engine({ models: [dir] });
    await expect(engine.generate({ prompt: "Hi" }, { signal: AbortSignal.abort() })).rejects.toMatchObject({
      name: "AbortError",
    });
  });
});

describe("a request whose prompt's pass fails", () => {
  it("fails alone: the streams already running go on", async () => {
    const engine = new Engine({ models: [dir] });
    const m = await engine.load();
    const noEos = Object.fromEntries(m.info.eosTokenIds.map((id) => [String(id), -100]));
    const prefill = m.runner.prefill.bind(m.runner);
    let poisoned = false;
    m.runner.prefill = async (...args) => {
      if (poisoned) {
        poisoned = false;
        throw new Error("Gather: indices element out of data bounds");
      }
      return prefill(...args);
    };
    const running = engine.generate({ prompt: "The city was quiet", max_tokens: 150, seed: 1, logit_bias: noEos });
    const scheduler = await engine.scheduler();
    await expect.poll(() => scheduler.stats().running, { interval: 1 }).toBeGreaterThan(0);
    poisoned = true;
    await expect(engine.generate({ prompt: "Hello", max_tokens: 5, tenant: "other" })).rejects.toMatchObject({
      code: "internal",
      message: expect.stringContaining("out of data bounds"),
    });
    // Before: "forward pass failed" for every stream on the worker.
    expect((await running).usage.completion_tokens).toBe(150);
    expect((await engine.generate({ prompt: "Hello", max_tokens: 5, logit_bias: noEos })).usage.completion_tokens).toBe(
      5,
    );
  });
});

describe("a request whose prompt's pass fails between the passes of a decode step", () => {
  it("fails alone on an exact-length model too (its step runs a pass per row length)", async () => {
    const engine = new Engine({ models: [await llamaLayoutDir("no-position-ids")] });
    const m = await engine.load();
    expect(m.info.layout).toBe("exact-length");
    const noEos = Object.fromEntries(m.info.eosTokenIds.map((id) => [String(id), -100]));
    const prefill = m.runner.prefill.bind(m.runner);
    let poisoned = false;
    m.runner.prefill = async (...args) => {
      if (poisoned) throw new Error("Gather: indices element out of data bounds");
      return prefill(...args);
    };
    // Two rows of different lengths: each decode step runs two passes, and a prompt that arrives
    // meanwhile is prefilled between them.
    const running = [
      engine.generate({ prompt: "The city", max_tokens: 120, seed: 1, logit_bias: noEos, tenant: "team-a" }),
      engine.generate({
        prompt: "Once upon a time in the",
        max_tokens: 120,
        seed: 2,
        logit_bias: noEos,
        tenant: "team-a",
      }),
    ];
    const scheduler = await engine.scheduler();
    await expect.poll(() => scheduler.stats().running, { interval: 1 }).toBe(2);
    poisoned = true;
    for (let i = 0; i < 5; i++)
      await expect(engine.generate({ prompt: `Hello ${i}`, max_tokens: 5, tenant: "team-b" })).rejects.toMatchObject({
        code: "internal",
      });
    poisoned = false;
    // Before: a prefill between two passes that failed ended every stream on the worker.
    for (const r of await Promise.all(running)) expect(r.usage.completion_tokens).toBe(120);
  });
});

describe("a throw while admitting", () => {
  it("ends the requests it concerns, and the next request is served", async () => {
    const engine = new Engine({ models: [dir] });
    const scheduler = await engine.scheduler();
    const internal = scheduler as unknown as { kvBytes: (...a: unknown[]) => number };
    const kvBytes = internal.kvBytes.bind(scheduler);
    // Admitting meets the throw (submitting's own sizing passes).
    internal.kvBytes = (...a: unknown[]) => {
      if (new Error().stack?.includes(".admit")) throw new Error("could not size the cache");
      return kvBytes(...a);
    };
    // Before: the loop met it at every turn (100% of a core) and the request never ended.
    await expect(engine.generate({ prompt: "Hello", max_tokens: 3 })).rejects.toMatchObject({
      message: expect.stringContaining("could not size the cache"),
    });
    internal.kvBytes = kvBytes;
    expect((await engine.generate({ prompt: "Hello", max_tokens: 3 })).choices).toHaveLength(1);
    await scheduler.whenIdle();
    expect(scheduler.stats()).toMatchObject({ queued: 0, running: 0 });
  });
});

describe("bounded queue", () => {
  it("past the queue limit, a request fails with overloaded", async () => {
    const engine = new Engine({ models: [dir], maxBatch: 1, maxQueue: 2 });
    await engine.load();
    const running = [0, 1, 2].map((i) => engine.generate({ prompt: "Hello", max_tokens: 30, seed: i }));
    // One is admitted at once; then two wait in the queue, the fourth is refused.
    await expect(engine.generate({ prompt: "Hello", max_tokens: 3 })).rejects.toMatchObject({
      code: "overloaded",
      message: expect.stringContaining("overloaded"),
    });
    const done = await Promise.all(running);
    expect(done.every((r) => r.usage.completion_tokens === 30)).toBe(true);
  });

  it("is per team: one team's full queue does not turn away another team's request", async () => {
    const engine = new Engine({ models: [dir], maxBatch: 1, maxQueue: 2 });
    const m = await engine.load();
    const flood = [0, 1, 2].map((i) => engine.generate({ prompt: "Hello", max_tokens: 30, seed: i, tenant: "team-a" }));
    await expect(engine.generate({ prompt: "Hello", max_tokens: 3, tenant: "team-a" })).rejects.toMatchObject({
      code: "overloaded",
      message: expect.stringContaining("2 of this team's requests already queued"),
    });
    // Team b queues behind team a's full queue, and is answered.
    // (EOS kept out: a sampled answer could otherwise end before its 3 tokens.)
    const noEos = Object.fromEntries(m.info.eosTokenIds.map((id) => [String(id), -100]));
    const other = await engine.generate({ prompt: "Hello", max_tokens: 3, tenant: "team-b", logit_bias: noEos });
    expect(other.usage.completion_tokens).toBe(3);
    await Promise.all(flood);
  });
});

describe("fair sharing between tenants", () => {
  it("admits another tenant's request at once while one tenant's n=16 requests fill the batch", async () => {
    const engine = new Engine({ models: [dir], maxBatch: 16 });
    const scheduler = await engine.scheduler();
    const m = scheduler.model;
    const noEos = { [String(m.info.eosTokenIds[0])]: -100 };
    const flood = Array.from({ length: 4 }, (_, i) =>
      engine.generate({ prompt: `Flood ${i}`, max_tokens: 60, n: 16, seed: i, logit_bias: noEos, tenant: "team-a" }),
    );
    // The first flood request now runs 16 sequences; three more wait behind it.
    await expect.poll(() => scheduler.stats().running, { interval: 5, timeout: 30_000 }).toBe(16);
    const submittedAt = m.stats.forwardCalls;
    let firstTokenAt = -1;
    const events = await engine.start({ prompt: "Hello", max_tokens: 3, temperature: 0, tenant: "team-b" });
    for await (const e of events) {
      if (e.type === "delta" && firstTokenAt < 0) firstTokenAt = m.stats.forwardCalls;
    }
    // Its prefill ran within a couple of passes of its arrival, not after the flood's 60 steps.
    expect(firstTokenAt - submittedAt).toBeLessThanOrEqual(3);
    expect(scheduler.stats().queued).toBeGreaterThanOrEqual(2); // team A's requests still wait their turn
    const results = await Promise.all(flood);
    expect(results.map((r) => r.choices.length)).toEqual([16, 16, 16, 16]);
    expect(results.every((r) => r.choices.every((c) => c.finish_reason === "length"))).toBe(true);
  });

  it("does not hold one tenant's next request back while another tenant's few sequences run", async () => {
    const engine = new Engine({ models: [dir], maxBatch: 16 });
    const scheduler = await engine.scheduler();
    const noEos = { [String(scheduler.model.info.eosTokenIds[0])]: -100 };
    const order: string[] = [];
    const gen = (tenant: string, name: string, max_tokens: number, n: number) =>
      engine.generate({ prompt: name, max_tokens, n, seed: 1, logit_bias: noEos, tenant }).then(() => order.push(name));
    // Team A: two requests of 8 sequences fill the batch, a third waits.
    const a = [gen("team-a", "a1", 10, 8), gen("team-a", "a2", 80, 8)];
    await expect.poll(() => scheduler.stats().running, { interval: 5, timeout: 30_000 }).toBe(16);
    a.push(gen("team-a", "a3", 10, 8));
    // Team B's one long sequence joins the full batch.
    const b = gen("team-b", "b", 160, 1);
    await Promise.all([...a, b]);
    // a3 took a1's place when it ended, beside b's sequence, rather than waiting for a2 or b.
    expect(order).toEqual(["a1", "a3", "a2", "b"]);
  });

  it("takes the next request from the tenant with the fewest sequences running, not the oldest", async () => {
    const engine = new Engine({ models: [dir], maxBatch: 4 });
    const scheduler = await engine.scheduler();
    const noEos = { [String(scheduler.model.info.eosTokenIds[0])]: -100 };
    const order: string[] = [];
    const run = (tenant: string, i: number) =>
      engine
        .generate({ prompt: `${tenant} ${i}`, max_tokens: 8, n: 2, seed: i, logit_bias: noEos, tenant })
        .then(() => order.push(`${tenant}${i}`));
    // Team A queues three requests before team B's one: B's is not served last.
    const all = [run("a", 1), run("a", 2), run("a", 3), run("b", 1)];
    await Promise.all(all);
    expect(order.indexOf("b1")).toBeLessThan(order.indexOf("a3"));
  });

  it("a team whose requests end with their prefill (max_tokens 1) does not stop another team's decoding", async () => {
    const engine = new Engine({ models: [dir], maxBatch: 16 });
    const scheduler = await engine.scheduler();
    const noEos = { [String(scheduler.model.info.eosTokenIds[0])]: -100 };
    let steps = 0;
    const a = engine
      .start({ prompt: "Flood", max_tokens: 400, seed: 1, logit_bias: noEos, tenant: "team-a" })
      .then(async (s) => {
        for await (const e of s) if (e.type === "delta") steps++;
      });
    await expect.poll(() => scheduler.stats().running, { interval: 1, timeout: 30_000 }).toBe(1);
    const before = steps;
    // Team B keeps four requests queued, 24 in all; each ends with its prefill, so team B never
    // has a row running and always counts as a newcomer.
    let next = 0;
    const client = async () => {
      while (next < 24) {
        const i = next++;
        await engine.generate({ prompt: `Question number ${i}?`, max_tokens: 1, tenant: "team-b" });
      }
    };
    await Promise.all([client(), client(), client(), client()]);
    // A decode step between two of B's prompts: before, team A's stream got none until B stopped.
    expect(steps - before).toBeGreaterThanOrEqual(8);
    await a;
  });

  it("a team whose requests never hold a row does not make another team's queued streams run one at a time", async () => {
    const engine = new Engine({ models: [dir], maxBatch: 16 });
    const scheduler = await engine.scheduler();
    const noEos = { [String(scheduler.model.info.eosTokenIds[0])]: -100 };
    // Team A's three streams and team B's 40 classifications (max_tokens 1) queued together.
    const a = [1, 2, 3].map((i) =>
      engine.generate({ prompt: `Story ${i}`, max_tokens: 60, seed: i, logit_bias: noEos, tenant: "team-a" }),
    );
    let bDone = 0;
    const b = Array.from({ length: 40 }, (_, i) =>
      engine.generate({ prompt: `Label ${i}?`, max_tokens: 1, tenant: "team-b" }).then(() => bDone++),
    );
    // Rows are only ever team A's (team B's requests end with their prefill).
    let most = 0;
    while (bDone < 40) {
      most = Math.max(most, scheduler.stats().running);
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all([...a, ...b]);
    // Before: team B (never a row, so always "fewest running") won every admission, and team A's
    // streams ran one at a time until team B's queue was empty.
    expect(most).toBeGreaterThanOrEqual(2);
  });

  it("between teams with equally many running, the one admitted longest ago goes next, not the oldest request", async () => {
    const probe = new Engine({ models: [dir] });
    const m = await probe.load();
    const { kv } = m.info.graph;
    const perToken = kv.entries.length * kv.heads * kv.headDim * (kv.type === "float16" ? 2 : 4);
    await probe.dispose();
    // Room for one request of 40 tokens at a time.
    const engine = new Engine({ models: [dir], kvBudgetBytes: 60 * perToken });
    const scheduler = await engine.scheduler();
    const noEos = { [String(scheduler.model.info.eosTokenIds[0])]: -100 };
    const order: string[] = [];
    const run = (tenant: string, i: number) =>
      engine
        .generate({ prompt: `${tenant} ${i}`, max_tokens: 36, seed: i, logit_bias: noEos, tenant })
        .then(() => order.push(`${tenant}${i}`));
    const all = [run("a", 1), run("a", 2), run("a", 3)];
    await expect.poll(() => scheduler.stats().running, { interval: 1, timeout: 30_000 }).toBe(1);
    all.push(run("b", 1));
    await Promise.all(all);
    expect(order).toEqual(["a1", "b1", "a2", "a3"]); // before: a1, a2, a3, b1
  });

  const longPrompt =
    "Good morning, everyone. Today we will talk about the history of the river and the old bridge in our town.";

  /** An engine that prefills 2 tokens a pass, running one long generation of team A's. */
  async function teamARunning() {
    const engine = new Engine({ models: [dir], maxBatch: 16, prefillChunk: 2 });
    const scheduler = await engine.scheduler();
    const m = scheduler.model;
    const noEos = { [String(m.info.eosTokenIds[0])]: -100 };
    const running = engine.generate({ prompt: "Flood", max_tokens: 150, seed: 1, logit_bias: noEos, tenant: "team-a" });
    await expect.poll(() => scheduler.stats().running, { interval: 1, timeout: 30_000 }).toBe(1);
    return { engine, scheduler, m, running };
  }

  it("runs a newcomer's prompt before the rest of another tenant's long prompt prefilled in chunks", async () => {
    const { engine, scheduler, m, running } = await teamARunning();
    expect(m.tokenizer.encode(longPrompt).length).toBeGreaterThan(16);
    const solo = await new Engine({ models: [dir], prefillChunk: 2 }).generate({
      prompt: longPrompt,
      max_tokens: 6,
      temperature: 0,
    });
    // Team A runs one sequence, then its next request's long prompt is prefilled 2 tokens a pass.
    let longFirst = -1;
    const long = engine
      .start({ prompt: longPrompt, max_tokens: 6, temperature: 0, tenant: "team-a" })
      .then(async (s) => {
        let text = "";
        for await (const e of s)
          if (e.type === "delta") {
            if (longFirst < 0) longFirst = m.stats.forwardCalls;
            text += e.text;
          }
        return text;
      });
    await expect.poll(() => scheduler.stats().prefilling, { interval: 1, timeout: 30_000 }).toBe(1);
    const submittedAt = m.stats.forwardCalls;
    let firstTokenAt = -1;
    for await (const e of await engine.start({ prompt: "Hello", max_tokens: 2, temperature: 0, tenant: "team-b" }))
      if (e.type === "delta" && firstTokenAt < 0) firstTokenAt = m.stats.forwardCalls;
    // Team B's prompt ran within a pass or two, not after the ~9 remaining chunks (and as many decode steps).
    expect(firstTokenAt - submittedAt).toBeLessThanOrEqual(3);
    expect(longFirst === -1 || longFirst > firstTokenAt).toBe(true);
    // The parked prefill resumed where it stopped: the same text as alone.
    expect(await long).toBe(solo.choices[0].text);
    expect((await running).usage.completion_tokens).toBe(150);
  });

  it("a prefill parked back in its queue and cancelled there counts its prompt (its prefill had begun)", async () => {
    const { engine, scheduler, m, running } = await teamARunning();
    const left = new AbortController();
    const long = engine
      .start({ prompt: longPrompt, max_tokens: 6, temperature: 0, tenant: "team-a" }, { signal: left.signal })
      .then(async (s) => {
        for await (const e of s) void e;
        return null;
      })
      .catch((e: { usage?: unknown }) => e.usage);
    await expect.poll(() => scheduler.stats().prefilling, { interval: 1, timeout: 30_000 }).toBe(1);
    // Team B's long prompt parks team A's for its own ~12 passes of 2 tokens.
    const submittedAt = m.stats.forwardCalls;
    const newcomer = engine.generate({
      prompt: `${longPrompt} Again`,
      max_tokens: 2,
      temperature: 0,
      tenant: "team-b",
    });
    await expect
      .poll(() => m.stats.forwardCalls - submittedAt, { interval: 1, timeout: 30_000 })
      .toBeGreaterThanOrEqual(3);
    expect(scheduler.stats()).toMatchObject({ queued: 1, prefilling: 1 }); // A's parked, B's prefilling
    left.abort();
    expect(await long).toEqual({
      prompt_tokens: m.tokenizer.encode(longPrompt).length,
      completion_tokens: 0,
      total_tokens: m.tokenizer.encode(longPrompt).length,
    });
    await Promise.all([newcomer, running]);
  });
});

describe("a graph whose output is not a number", () => {
  it("fails that request with the reason (not a silent stop); the others in the batch go on", async () => {
    const engine = new Engine({ models: [dir] });
    const m: LoadedModel = await engine.load();
    const runner = m.runner as { prefill: (...args: unknown[]) => Promise<{ logits: Float32Array }> };
    const prefill = runner.prefill.bind(runner);
    // An fp16 overflow, stood in for: the prefill of one prompt gives NaN logits.
    runner.prefill = async (...args: unknown[]) => {
      const out = await prefill(...args);
      const ids = args[1] as number[];
      if (ids.length === m.tokenizer.encode("Poisoned prompt here").length) out.logits.fill(NaN);
      return out;
    };
    const [poisoned, fine] = await Promise.allSettled([
      engine.generate({ prompt: "Poisoned prompt here", max_tokens: 8, n: 2 }),
      engine.generate({ prompt: "The dog sleeps in the garden and", max_tokens: 8, temperature: 0 }),
    ]);
    expect(poisoned.status).toBe("rejected");
    expect((poisoned as PromiseRejectedResult).reason).toMatchObject({
      code: "internal",
      message: expect.stringContaining("not a number at token 1"),
    });
    expect(fine.status).toBe("fulfilled");
    expect(
      (fine as PromiseFulfilledResult<{ choices: { text: string }[] }>).value.choices[0]!.text.length,
    ).toBeGreaterThan(0);
    const scheduler = await engine.scheduler();
    await scheduler.whenIdle();
    expect(scheduler.stats()).toMatchObject({ running: 0, queued: 0 });
  });
});
