// The prompt cache (scheduler.ts, promptCacheBytes): a request whose prompt was prefilled before
// runs no prefill pass, and one that begins like a kept prompt skips the chunks they share; both
// answer exactly as without the cache (exact-length, padded, gqa and hybrid models); a chat's
// finished answer is kept too, and its conversation's next turn starts after it, answering as
// without the cache within float32 rounding; the cache keeps within its bytes, least recently used
// out first.
import { describe, expect, it } from "vitest";
import { workerMetrics } from "../metrics";
import { renderChat } from "./chat-template";
import { Engine, type EngineOptions } from "./engine";
import { llamaDtypesDir, llamaLayoutDir, llamaModelDir, tinyModelDir } from "./testing/models";

const PROMPT = "Once upon a time there was a small village near a river";
const LONG = `${PROMPT}. The people of the village were fishermen, and every morning they went out on the water`;

async function engineOn(dir: string, opts: Partial<EngineOptions> = {}) {
  const engine = new Engine({ models: [dir], ...opts });
  const m = await engine.load();
  const scheduler = await engine.scheduler();
  return { engine, m, scheduler };
}

/** The bytes each prompt's entry adds to the prompt cache, the prompts run one after another. */
async function entrySizes(e: Awaited<ReturnType<typeof engineOn>>, prompts: readonly string[]) {
  const size: number[] = [];
  for (const prompt of prompts) {
    const before = e.scheduler.stats().promptCacheBytes;
    await e.engine.generate({ prompt, max_tokens: 2 });
    size.push(e.scheduler.stats().promptCacheBytes - before);
  }
  return size;
}

/** One model per cache layout: exact-length, padded and gqa rows, and recurrent states. */
const MODELS = [
  { name: "gpt2, exact-length rows", dir: () => tinyModelDir() },
  { name: "llama, padded rows", dir: llamaModelDir },
  { name: "llama, GroupQueryAttention (gqa rows)", dir: () => llamaLayoutDir("gqa") },
  { name: "hybrid llama (recurrent states)", dir: () => llamaLayoutDir("hybrid") },
];

const texts = (rs: { choices: { text: string }[] }[]) => rs.map((r) => r.choices.map((c) => c.text));

describe.each(MODELS)("the prompt cache: $name", ({ dir }) => {
  const requests = [
    { prompt: PROMPT, max_tokens: 12, seed: 1, temperature: 0.8 },
    { prompt: PROMPT, max_tokens: 12, seed: 2, temperature: 0.8 },
    { prompt: PROMPT, max_tokens: 10, temperature: 0 },
    { prompt: PROMPT, max_tokens: 10, seed: 3, n: 2 },
    { prompt: LONG, max_tokens: 8, seed: 4 },
    { prompt: LONG, max_tokens: 8, seed: 5, temperature: 0.5 },
  ];

  it("a prompt prefilled before runs no prefill pass, and answers as without the cache", async () => {
    const plain = await engineOn(await dir(), { promptCacheBytes: 0, prefillChunk: 8 });
    const solo = [];
    for (const r of requests) solo.push(await plain.engine.generate(r));
    expect(plain.scheduler.stats()).toMatchObject({ promptCacheHits: 0, promptCacheBytes: 0 });
    await plain.engine.dispose();

    const cached = await engineOn(await dir(), { prefillChunk: 8 });
    const passes = async (r: (typeof requests)[number]) => {
      const before = cached.m.stats.forwardCalls;
      const out = await cached.engine.generate(r);
      return { out, passes: cached.m.stats.forwardCalls - before };
    };
    const first = await passes(requests[0]); // prefilled in chunks of 8, then kept
    const again = await passes(requests[0]);
    // The same request again: its passes are its decoding steps alone, its answer the same.
    const chunks = cached.m.info.chunkedPrefill ? Math.ceil(cached.m.tokenizer.encode(PROMPT).length / 8) : 1;
    expect(first.passes - again.passes).toBe(chunks);
    expect(texts([again.out])).toEqual(texts([first.out]));
    const rest = [];
    for (const r of requests.slice(1)) rest.push(await cached.engine.generate(r));
    expect(texts([first.out, ...rest])).toEqual(texts(solo));
    expect(cached.scheduler.stats().promptCacheHits).toBe(5); // PROMPT four more times, LONG once
    expect(cached.scheduler.stats().promptCacheBytes).toBeGreaterThan(0);

    // Together: every answer still its solo one.
    expect(texts(await Promise.all(requests.map((r) => cached.engine.generate(r))))).toEqual(texts(solo));
    expect(cached.scheduler.stats().promptCacheHits).toBe(11);
    await cached.engine.dispose();
  });
});

describe.each(MODELS)("a kept prompt's beginning: $name", ({ dir }) => {
  it("a prompt that begins like a kept one skips the whole chunks they share, and answers as without the cache", async () => {
    const chunk = 8;
    const plain = await engineOn(await dir(), { promptCacheBytes: 0, prefillChunk: chunk });
    const base = plain.m.tokenizer.encode(LONG);
    expect(base.length).toBeGreaterThan(2 * chunk + 2);
    const other = base.slice(3, 7);
    // [prompt ids, tenant, tokens it can start from]: the first is kept; the second shares 2
    // chunks and a token; the third is the first 2 chunks exactly, so its second chunk (holding
    // its last token, whose logits it needs) runs again; the fourth is another team's.
    const cases: [number[], string, number][] = [
      [base, "a", 0],
      [[...base.slice(0, 2 * chunk + 1), ...other], "a", 2 * chunk],
      [base.slice(0, 2 * chunk), "a", chunk],
      [[...base.slice(0, 2 * chunk + 1), ...other], "b", 0],
    ];
    const request = (ids: number[], tenant: string, seed: number) => ({
      prompt: ids,
      tenant,
      max_tokens: 6,
      seed,
      temperature: seed % 2 ? 0.8 : 0,
      n: seed === 2 ? 2 : 1,
    });
    const run = async (e: Awaited<ReturnType<typeof engineOn>>) => {
      const out = [];
      for (const [i, [ids, tenant]] of cases.entries()) {
        const before = e.m.stats.forwardCalls;
        const r = await e.engine.generate(request(ids, tenant, i));
        out.push({ text: r.choices.map((c) => c.text), passes: e.m.stats.forwardCalls - before });
      }
      return out;
    };
    const solo = await run(plain);
    await plain.engine.dispose();

    const cached = await engineOn(await dir(), { prefillChunk: chunk });
    const reused = cached.m.info.chunkedPrefill && cached.m.info.graph.states.length === 0;
    const kept = await run(cached);
    expect(kept.map((k) => k.text)).toEqual(solo.map((s) => s.text));
    // Exactly the shared whole chunks are not run again (none on a model with recurrent states).
    const skipped = cases.map(([, , from]) => (reused ? from / chunk : 0));
    expect(kept.map((k, i) => solo[i].passes - k.passes)).toEqual(skipped);
    const tokens = reused ? 3 * chunk : 0;
    expect(cached.scheduler.stats()).toMatchObject({
      promptCacheHits: 0,
      promptCachePrefixHits: reused ? 2 : 0,
      promptCachePrefixTokens: tokens,
    });
    const metrics = await workerMetrics(cached.engine).getMetricsAsJSON();
    const gauge = metrics.find((m) => m.name === "lmp_prompt_cache_prefix_tokens");
    expect(gauge?.values[0]?.value).toBe(tokens);

    // Together, each starting from whatever is kept by then: every answer still its solo one.
    const together = await Promise.all(
      cases.map(([ids, tenant], i) => cached.engine.generate(request(ids, tenant, i))),
    );
    expect(together.map((r) => r.choices.map((c) => c.text))).toEqual(solo.map((s) => s.text));
    await cached.engine.dispose();
  });
});

describe("a conversation's next turn", () => {
  it("starts from the earlier turn's kept chunks through the chat template, and answers as without the cache", async () => {
    const chunk = 8;
    const system = { role: "system" as const, content: `You tell stories. ${LONG}.` };
    const first = [system, { role: "user" as const, content: "Tell me about the river." }];
    const turns = async (e: Awaited<ReturnType<typeof engineOn>>) => {
      const one = await e.engine.generate({ messages: first, max_tokens: 8, temperature: 0 });
      const answer = { role: "assistant" as const, content: one.choices[0].text };
      const next = [...first, answer, { role: "user" as const, content: "And the bridge?" }];
      const two = await e.engine.generate({ messages: next, max_tokens: 8, seed: 3 });
      return [one, two].map((r) => r.choices[0].text);
    };
    const plain = await engineOn(await tinyModelDir(), { promptCacheBytes: 0, prefillChunk: chunk });
    const expected = await turns(plain);
    await plain.engine.dispose();
    // (Kept answers off: only the prefill's own columns are reused, and exactly. See below.)
    const cached = await engineOn(await tinyModelDir(), { prefillChunk: chunk, promptCacheAnswers: false });
    expect(await turns(cached)).toEqual(expected);
    const { promptCachePrefixHits, promptCachePrefixTokens } = cached.scheduler.stats();
    expect(promptCachePrefixHits).toBe(1);
    // At least the system prompt's and the first question's whole chunks.
    const firstIds = cached.m.tokenizer.encode(renderChat(cached.m.tokenizer, first), { add_special_tokens: false });
    expect(promptCachePrefixTokens).toBeGreaterThanOrEqual(Math.floor((firstIds.length - 2) / chunk) * chunk);
    await cached.engine.dispose();
  });
});

/** And the generated llama, whose padded rows take a prompt chunk on a cache (the third-party one's do not). */
const ANSWER_MODELS: { name: string; dir: () => Promise<string>; opts?: Partial<EngineOptions> }[] = [
  ...MODELS,
  {
    name: "generated llama (fp32), padded rows with chunks",
    dir: () => llamaDtypesDir(),
    opts: { loadOptions: () => ({ dtype: "fp32" }) },
  },
];

describe.each(ANSWER_MODELS)("a kept chat answer: $name", ({ name, dir, opts }) => {
  it("the conversation's next turn starts after the earlier turn's prompt and answer, for its team only", async () => {
    const chunk = 8;
    // Two conversations at once: each answer's cache is its own row's (the second's turn 1 ends
    // first, in the batch's second row).
    const conversations = [
      { question: "Tell me about the river.", tokens: 12 },
      { question: "Who lived in the village?", tokens: 7 },
    ].map(({ question, tokens }) => ({
      messages: [
        { role: "system" as const, content: `You tell stories. ${PROMPT}.` },
        { role: "user" as const, content: question },
      ],
      tokens,
    }));
    // Turn 1 runs to max_tokens (EOS banned), of which the model fed all but the last token.
    // (Chat turns keep their answers; the ids' turn, a prompt request, does not.)
    const turns = async (
      e: Awaited<ReturnType<typeof engineOn>>,
      { messages: first, tokens }: (typeof conversations)[0],
      tenant?: string,
    ) => {
      const noEos = Object.fromEntries(e.m.info.eosTokenIds.map((id) => [String(id), -100]));
      const one = await e.engine.generate({
        messages: first,
        max_tokens: tokens,
        temperature: 0,
        logprobs: 1,
        logit_bias: noEos,
        tenant,
      });
      const firstIds = e.m.tokenizer.encode(renderChat(e.m.tokenizer, first), { add_special_tokens: false });
      const generated = one.choices[0].logprobs!.map((l) => l.token_id);
      // Turn 2 as the ids the model fed and more (a chat client's re-rendered text may tokenize
      // the answer otherwise: then the reuse stops where the ids part), and as a chat.
      const ids = await e.engine.generate({
        prompt: [...firstIds, ...generated, ...firstIds.slice(0, 5)],
        max_tokens: 6,
        temperature: 0,
        logprobs: 3,
        tenant,
      });
      const answer = { role: "assistant" as const, content: one.choices[0].text };
      const next = [...first, answer, { role: "user" as const, content: "And the bridge?" }];
      const chat = await e.engine.generate({
        messages: next,
        max_tokens: 6,
        temperature: 0,
        logit_bias: noEos,
        tenant,
      });
      const logprobs = ids.choices[0].logprobs!.flatMap((l) => l.top_logprobs.map((t) => t.logprob));
      return { texts: [one, ids, chat].map((r) => r.choices[0].text), fed: firstIds.length + tokens - 1, logprobs };
    };
    const both = (e: Awaited<ReturnType<typeof engineOn>>, tenant?: string) =>
      Promise.all(conversations.map((c) => turns(e, c, tenant)));
    const plain = await engineOn(await dir(), { ...opts, promptCacheBytes: 0, prefillChunk: chunk });
    const expected = await both(plain);
    await plain.engine.dispose();

    const cached = await engineOn(await dir(), { ...opts, prefillChunk: chunk });
    const got = await both(cached);
    await cached.scheduler.whenIdle(); // (the last answers are kept as their rows leave, after their streams end)
    const stats = cached.scheduler.stats();
    const metrics = await workerMetrics(cached.engine).getMetricsAsJSON();
    const gauge = metrics.find((m) => m.name === "lmp_prompt_cache_answers");
    expect(gauge?.values[0]?.value).toBe(stats.promptCacheAnswers);
    // A model with recurrent states keeps no answer (its rows cannot be cut back to a beginning),
    // nor one whose graph takes no prompt chunk on top of a cache (tiny-random-llama's).
    const keeps = cached.m.info.chunkedPrefill && cached.m.info.graph.states.length === 0;
    expect(keeps).toBe(!name.startsWith("hybrid") && name !== "llama, padded rows");
    expect(stats.promptCacheAnswers).toBe(keeps ? 4 : 0); // both turns of both conversations
    // Each ids' turn started after its prompt and the answer tokens the model fed.
    if (keeps) expect(stats.promptCachePrefixTokens).toBeGreaterThanOrEqual(got[0].fed + got[1].fed);
    // The same answers and, within float32 rounding, logprobs as without the cache: the kept
    // columns, computed one token at a time, differ from a prefill's only in their last bits.
    expect(got.map((g) => g.texts)).toEqual(expected.map((x) => x.texts));
    got.forEach((g, c) =>
      g.logprobs.forEach((l, i) => expect(Math.abs(l - expected[c].logprobs[i])).toBeLessThan(1e-4)),
    );
    // Another team's same conversations start from nothing of this team's: their reuse is of
    // their own turn 1 only, as much as this team's was.
    expect((await both(cached, "team-b")).map((g) => g.texts)).toEqual(expected.map((x) => x.texts));
    await cached.scheduler.whenIdle();
    const after = cached.scheduler.stats();
    expect(after.promptCachePrefixTokens - stats.promptCachePrefixTokens).toBe(stats.promptCachePrefixTokens);
    await cached.engine.dispose();
  });

  it("is not kept for a prompt request, nor with promptCacheAnswers off", async () => {
    for (const [cacheOpts, request] of [
      [{}, { prompt: PROMPT, max_tokens: 6, temperature: 0 }],
      [{ promptCacheAnswers: false }, { messages: [{ role: "user" as const, content: PROMPT }], max_tokens: 6 }],
    ] as const) {
      const e = await engineOn(await dir(), { prefillChunk: 8, ...opts, ...cacheOpts });
      await e.engine.generate(request);
      await e.scheduler.whenIdle();
      expect(e.scheduler.stats().promptCacheAnswers).toBe(0);
      await e.engine.dispose();
    }
  });
});

describe("the prompt cache between teams", () => {
  it("is not shared: a team's prompt never answers another team's request", async () => {
    // A hit answers sooner: a shared cache would tell a team that another sent the same prompt.
    const { engine, scheduler } = await engineOn(await llamaModelDir());
    const hits = async (tenant: string) => {
      const before = scheduler.stats().promptCacheHits;
      await engine.generate({ prompt: PROMPT, max_tokens: 2, tenant });
      return scheduler.stats().promptCacheHits - before;
    };
    expect(await hits("team-a")).toBe(0);
    expect(await hits("team-b")).toBe(0);
    expect(await hits("team-a")).toBe(1);
    expect(await hits("team-b")).toBe(1);
    await engine.dispose();
  });
});

describe("the prompt cache's bytes between teams", () => {
  it("are given back by the team that holds the most: another team's new prompts never push out a team's few", async () => {
    const dir = await llamaModelDir();
    const prompts = ["small", "large", "quiet", "green", "little"].map((w) => PROMPT.replace("small", w));
    const probe = await engineOn(dir);
    const size = await entrySizes(probe, prompts);
    await probe.engine.dispose();
    expect(new Set(size).size).toBe(1); // one size: room for exactly 3
    const { engine, scheduler } = await engineOn(dir, { promptCacheBytes: 3 * size[0] });
    const hits = async (prompt: string, tenant: string) => {
      const before = scheduler.stats().promptCacheHits;
      await engine.generate({ prompt, max_tokens: 2, tenant });
      return scheduler.stats().promptCacheHits - before;
    };
    const [a, ...others] = prompts;
    expect(await hits(a, "team-a")).toBe(0);
    // team-b's four prompts: its third and fourth push out its own first and second, not team-a's
    // one (the least recently used of all, which a cache shared by recency alone would drop first).
    for (const b of others) expect(await hits(b, "team-b")).toBe(0);
    expect(await hits(a, "team-a")).toBe(1);
    expect(await hits(others[3], "team-b")).toBe(1);
    expect(await hits(others[0], "team-b")).toBe(0);
    expect(scheduler.stats().promptCacheBytes).toBeLessThanOrEqual(3 * size[0]);
    await engine.dispose();
  });
});

describe("the prompt cache's bytes", () => {
  it("keeps the most recently used prompts within its bytes, and none larger than them", async () => {
    const dir = await llamaModelDir();
    const a = PROMPT;
    const b = PROMPT.replace("small", "large");
    // What each prompt takes, from an engine that keeps them all.
    const probe = await engineOn(dir);
    const size: Record<string, number> = {};
    for (const prompt of [a, b, LONG]) {
      const before = probe.scheduler.stats().promptCacheBytes;
      await probe.engine.generate({ prompt, max_tokens: 2 });
      size[prompt] = probe.scheduler.stats().promptCacheBytes - before;
    }
    await probe.engine.dispose();
    // Room for a or b, not both; LONG, with more tokens, never fits.
    const room = Math.max(size[a], size[b]);
    expect(size[a] + size[b]).toBeGreaterThan(room);
    expect(size[LONG]).toBeGreaterThan(room);
    const { engine, scheduler } = await engineOn(dir, { promptCacheBytes: room });
    const hits = async (prompt: string) => {
      const before = scheduler.stats().promptCacheHits;
      await engine.generate({ prompt, max_tokens: 2 });
      return scheduler.stats().promptCacheHits - before;
    };
    expect(await hits(a)).toBe(0);
    expect(await hits(a)).toBe(1);
    expect(await hits(b)).toBe(0); // b in, a out
    expect(await hits(a)).toBe(0);
    expect(await hits(a)).toBe(1);
    expect(scheduler.stats().promptCacheBytes).toBeLessThanOrEqual(room);
    // A prompt larger than the whole cache is never kept.
    expect(await hits(LONG)).toBe(0);
    expect(await hits(LONG)).toBe(0);
    await engine.dispose();
  });
});

describe("a kept answer's bytes", () => {
  it("are its own columns only, over its prompt's kept cache, and the answer goes when the prompt does", async () => {
    const dir = await tinyModelDir();
    const messages = [{ role: "user" as const, content: `You tell stories. ${LONG}.` }];
    const others = ["the river", "the bridge", "the mill"].map((w) => [{ role: "user" as const, content: w }]);
    // What one token's cache takes, and the prompt's size, from an engine without answers kept.
    const probe = await engineOn(dir, { prefillChunk: 8, promptCacheAnswers: false });
    const noEos = Object.fromEntries(probe.m.info.eosTokenIds.map((id) => [String(id), -100]));
    const chat = (e: typeof probe, m: typeof messages, tokens: number) =>
      e.engine.generate({ messages: m, max_tokens: tokens, temperature: 0, logit_bias: noEos });
    await chat(probe, messages, 10);
    await probe.scheduler.whenIdle();
    const promptBytes = probe.scheduler.stats().promptCacheBytes;
    const promptTokens = probe.m.tokenizer.encode(renderChat(probe.m.tokenizer, messages), {
      add_special_tokens: false,
    }).length;
    const logitsBytes = probe.m.info.vocabSize * 4;
    const perToken = (promptBytes - logitsBytes) / promptTokens;
    await probe.engine.dispose();

    // The answer's entry: its 9 fed tokens' columns, not the prompt's again.
    const e = await engineOn(dir, { prefillChunk: 8 });
    await chat(e, messages, 10);
    await e.scheduler.whenIdle();
    expect(e.scheduler.stats()).toMatchObject({ promptCacheAnswers: 1, promptCacheBytes: promptBytes + 9 * perToken });
    await e.engine.dispose();

    // With room for the prompt and its answer and little more, other teams' prompts push out the
    // prompt, and its answer goes with it: nothing of the conversation is left to reuse.
    const small = await engineOn(dir, { prefillChunk: 8, promptCacheBytes: promptBytes + 12 * perToken });
    await chat(small, messages, 10);
    await small.scheduler.whenIdle();
    expect(small.scheduler.stats().promptCacheBytes).toBe(promptBytes + 9 * perToken);
    for (const [i, m] of others.entries())
      await small.engine.generate({ messages: m, max_tokens: 1, tenant: `other-${i}` });
    const before = small.scheduler.stats().promptCachePrefixTokens;
    await chat(small, messages, 1); // the same prompt: an exact hit would need the prompt's entry
    expect(small.scheduler.stats().promptCacheHits).toBe(0);
    expect(small.scheduler.stats().promptCachePrefixTokens).toBe(before);
    expect(small.scheduler.stats().promptCacheBytes).toBeLessThanOrEqual(promptBytes + 12 * perToken);
    await small.engine.dispose();
  });
});

describe("the prompt cache's idle room", () => {
  it("fills the KV budget's idle room beyond its bytes, and gives it back to a request that needs it, keeping what that request starts from", async () => {
    const dir = await tinyModelDir();
    const prompts = ["river", "bridge", "mill", "forest", "harbour"].map((w) => PROMPT.replace("river", w));
    // Each prompt's entry, and the cache a long request on prompts[0] is planned to take.
    const probe = await engineOn(dir);
    const size = await entrySizes(probe, prompts);
    const { kv } = probe.m.info.graph;
    const bytesPerToken = kv.entries.length * kv.heads * kv.headDim * (kv.type === "float16" ? 2 : 4);
    const noEos = Object.fromEntries(probe.m.info.eosTokenIds.map((id) => [String(id), -100]));
    const big = { prompt: prompts[0], max_tokens: 160, temperature: 0, logit_bias: noEos };
    const bigPlanned = (probe.m.tokenizer.encode(prompts[0]).length + big.max_tokens) * bytesPerToken;
    await probe.engine.dispose();
    const entry = Math.max(...size);
    // While the long request runs, the budget leaves the cache one and a half entries of idle
    // room, over its own bytes (one entry): two entries, not three. While short requests run
    // (each planned at 16 tokens or less), room for all five.
    const budget = bigPlanned + 1.5 * entry;
    expect(entry + budget - 16 * bytesPerToken).toBeGreaterThan(5 * entry);

    const run = async (idle: boolean) => {
      const e = await engineOn(dir, { promptCacheBytes: entry, kvBudgetBytes: budget, promptCacheIdleKv: idle });
      const hits = async (prompt: string) => {
        const before = e.scheduler.stats().promptCacheHits;
        await e.engine.generate({ prompt, max_tokens: 2 });
        return e.scheduler.stats().promptCacheHits - before;
      };
      for (const prompt of prompts) expect(await hits(prompt)).toBe(0);
      const kept = e.scheduler.stats().promptCacheBytes;
      const replays = [];
      for (const prompt of prompts) replays.push(await hits(prompt));
      return { e, hits, kept, replays };
    };

    // Without the idle room: one entry's bytes, so each prompt pushed out the one before.
    const off = await run(false);
    await off.e.scheduler.whenIdle();
    expect(off.e.scheduler.stats().promptCacheRoom).toBe(entry);
    expect(off.kept).toBeLessThanOrEqual(entry);
    expect(off.replays).toEqual([0, 0, 0, 0, 0]);
    await off.e.engine.dispose();

    // With it: all five kept, and each replay answered from the cache.
    const on = await run(true);
    await on.e.scheduler.whenIdle();
    // An idle batch: the whole budget, less the buffers the emptied batch keeps for a while.
    const idle = on.e.scheduler.stats();
    expect(idle.kvBytes).toBeGreaterThan(0);
    expect(idle.promptCacheRoom).toBe(entry + budget - idle.kvBytes);
    expect(on.kept).toBe(size.reduce((a, b) => a + b));
    expect(on.replays).toEqual([1, 1, 1, 1, 1]);
    // The long request needs the room: the cache gives it back down to two entries, the least
    // recently used first, but not prompts[0] (the least recently used of all), which it starts from.
    const before = on.e.scheduler.stats().promptCacheHits;
    // Cache and batch together, at every pass: within the cache's bytes and the budget.
    let held = 0;
    const pass = on.e.m.session.run;
    on.e.m.session.run = (feeds, fetches) => {
      const s = on.e.scheduler.stats();
      held = Math.max(held, s.promptCacheBytes + s.kvBytes);
      return pass.call(on.e.m.session, feeds, fetches);
    };
    const out = await on.e.engine.generate(big);
    on.e.m.session.run = pass;
    expect(held).toBeGreaterThan(bigPlanned);
    expect(held).toBeLessThanOrEqual(entry + budget);
    expect(out.choices[0]!.finish_reason).toBe("length");
    expect(on.e.scheduler.stats().promptCacheHits - before).toBe(1);
    expect(on.e.scheduler.stats().promptCacheBytes).toBeLessThanOrEqual(2.5 * entry);
    expect(await on.hits(prompts[4])).toBe(1); // the most recently used other entry stayed
    expect(await on.hits(prompts[1])).toBe(0); // the least recently used went
    await on.e.engine.dispose();
  });
});
