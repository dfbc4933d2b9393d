// The internal inference server: auth, generate, stream, errors, disconnect cancels.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engine } from "../engine/engine";
import type { Scheduler } from "../engine/scheduler";
import { tinyModelDir } from "../engine/testing/models";
import { InferenceClient, InferenceError } from "@/lib/inference/client";
import { startInferenceServer, type InferenceServer } from "./server";

let engine: Engine;
let scheduler: Scheduler;
let server: InferenceServer;
let client: InferenceClient;
const secret = "s3cret-for-tests";

beforeAll(async () => {
  engine = new Engine({ models: [await tinyModelDir()], maxBatch: 2, maxQueue: 1 });
  scheduler = await engine.scheduler();
  server = await startInferenceServer({ engine, secret, log: () => {} });
  client = new InferenceClient({ url: server.url, secret });
});
afterAll(() => server.close());

describe("internal inference server", () => {
  it("listens on loopback", () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  it("401 without or with a wrong secret", async () => {
    const none = await fetch(`${server.url}/generate`, { method: "POST", body: "{}" });
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({ error: { type: "unauthorized", message: expect.any(String) } });
    await expect(
      new InferenceClient({ url: server.url, secret: "wrong" }).generate({ prompt: "Hi" }),
    ).rejects.toMatchObject({ status: 401, type: "unauthorized" });
  });

  it("generate returns the same result as the engine", async () => {
    const req = { prompt: "The dog sleeps in the", max_tokens: 10, seed: 3, n: 2 };
    const viaHttp = await client.generate(req);
    expect(viaHttp).toEqual(await engine.generate(req));
    expect(viaHttp.choices).toHaveLength(2);
  });

  it("stream: deltas concatenate to the generate() text, then finish and done", async () => {
    const req = { prompt: "Once upon a time", max_tokens: 20, seed: 4, stop: [" the"] };
    const events = [];
    for await (const e of client.stream(req)) events.push(e);
    const text = events.map((e) => (e.type === "delta" ? e.text : "")).join("");
    expect(text).toBe((await client.generate(req)).choices[0].text);
    expect(events.filter((e) => e.type === "delta").length).toBeGreaterThan(1);
    expect(events.at(-1)).toMatchObject({ type: "done" });
  });

  it("with `serves`, turns away a model, dtype or team it was not given, before the engine sees it", async () => {
    const asked: string[] = [];
    const placed = await startInferenceServer({
      engine,
      secret,
      log: () => {},
      serves: (model, dtype, tenant) => (asked.push(`${model}#${dtype}@${tenant}`), dtype === "auto" && tenant === "a"),
    });
    try {
      const c = new InferenceClient({ url: placed.url, secret });
      const model = engine.models[0]!;
      const loaded = async () => (await engine.loadStats()).map((l) => `${l.dtype}`);
      const before = await loaded();
      await expect(c.generate({ model, tenant: "b", prompt: "Hi", max_tokens: 2 })).rejects.toMatchObject({
        status: 404,
        param: "model",
        message: expect.stringContaining("not served by this worker for this team"),
      });
      await expect(c.generate({ model, dtype: "q4", tenant: "a", prompt: "Hi", max_tokens: 2 })).rejects.toMatchObject({
        status: 404,
        param: "model",
      });
      expect(await loaded()).toEqual(before); // no q4 load began
      // The streaming route is guarded the same way.
      await expect(async () => {
        for await (const e of c.stream({ model, tenant: "b", prompt: "Hi", max_tokens: 2 })) void e;
      }).rejects.toMatchObject({ status: 404, param: "model" });
      // Team a's request, dtype defaulting to auto, is served as without the guard.
      const req = { model, tenant: "a", prompt: "The dog sleeps in the", max_tokens: 4, seed: 1 };
      expect(await c.generate(req)).toEqual(await engine.generate(req));
      expect(asked).toEqual([`${model}#auto@b`, `${model}#q4@a`, `${model}#auto@b`, `${model}#auto@a`]);
    } finally {
      await placed.close();
    }
  });

  it("errors use the error body with the right status", async () => {
    await expect(client.generate({ prompt: "Hi", top_k: 0 })).rejects.toMatchObject({
      status: 400,
      type: "invalid_request",
      param: "top_k",
    });
    await expect(client.generate({ prompt: "Hi", max_tokens: 1024 })).rejects.toMatchObject({
      status: 400,
      type: "context_length_exceeded",
    });
    await expect(client.stream({ prompt: "Hi", temperature: 2 })[Symbol.asyncIterator]().next()).rejects.toBeInstanceOf(
      InferenceError,
    );
    const bad = await fetch(`${server.url}/generate`, {
      method: "POST",
      headers: { authorization: `Bearer ${secret}` },
      body: "{nope",
    });
    expect(bad.status).toBe(400);
  });

  it("overloaded engine answers 429 rate_limited", async () => {
    const long = { prompt: "Hello", max_tokens: 200, seed: 1, n: 2 };
    const running = [client.generate(long), client.generate(long)]; // one runs (n=2 fills the batch), one queues
    await new Promise((r) => setTimeout(r, 50));
    await expect(client.generate({ prompt: "Hi", max_tokens: 2 })).rejects.toMatchObject({
      status: 429,
      type: "rate_limited",
    });
    await Promise.all(running);
  });

  it("a client that disconnects mid-stream cancels the generation", async () => {
    await scheduler.whenIdle();
    const before = scheduler.model.stats.forwardCalls;
    const controller = new AbortController();
    let deltas = 0;
    await expect(
      (async () => {
        const noEos = { [String(scheduler.model.info.eosTokenIds[0])]: -100 };
        for await (const e of client.stream(
          { prompt: "The city was quiet", max_tokens: 1000, seed: 2, logit_bias: noEos },
          { signal: controller.signal, requestId: "req-left-stream" },
        )) {
          if (e.type === "delta" && ++deltas === 3) controller.abort();
        }
      })(),
    ).rejects.toMatchObject({ name: "AbortError" });
    await new Promise((r) => setTimeout(r, 100));
    await scheduler.whenIdle();
    const calls = scheduler.model.stats.forwardCalls - before;
    expect(calls).toBeLessThan(200);
    expect(scheduler.stats()).toMatchObject({ running: 0, queued: 0 });
    // What it used, for the app to charge: the prompt, and each token drawn (one per pass after it).
    const prompt = scheduler.model.tokenizer.encode("The city was quiet").length;
    const usage = await client.leftUsage("req-left-stream");
    expect(usage).toMatchObject({ prompt_tokens: prompt, total_tokens: prompt + usage!.completion_tokens });
    expect(usage!.completion_tokens).toBeGreaterThanOrEqual(3);
    expect(usage!.completion_tokens).toBeLessThanOrEqual(calls);
    expect(await client.leftUsage("req-never-sent", 100)).toBeNull();
  });

  it("keeps what a generation used for a client that leaves after it ended, its last events unread", async () => {
    // A slow reader: the generation runs on (its events wait for the reader) and has ended when
    // the client leaves; before, nothing was kept, and the app charged such a client nothing.
    await scheduler.whenIdle();
    const controller = new AbortController();
    const noEos = { [String(scheduler.model.info.eosTokenIds[0])]: -100 };
    const events = client
      .stream(
        { prompt: "The city was quiet", max_tokens: 200, seed: 2, logit_bias: noEos },
        { signal: controller.signal, requestId: "req-slow-reader" },
      )
      [Symbol.asyncIterator]();
    expect((await events.next()).done).toBe(false);
    await scheduler.whenIdle(); // ended, all but the first event unread
    controller.abort();
    await events.return?.(undefined).catch(() => {});
    const prompt = scheduler.model.tokenizer.encode("The city was quiet").length;
    expect(await client.leftUsage("req-slow-reader")).toEqual({
      prompt_tokens: prompt,
      completion_tokens: 200,
      total_tokens: prompt + 200,
    });
  });

  it("a client that disconnects during a non-streamed generate cancels it too", async () => {
    await scheduler.whenIdle();
    const before = scheduler.model.stats.forwardCalls;
    const controller = new AbortController();
    const noEos = { [String(scheduler.model.info.eosTokenIds[0])]: -100 };
    const pending = client.generate(
      { prompt: "The city was quiet", max_tokens: 1000, seed: 2, logit_bias: noEos },
      { signal: controller.signal, requestId: "req-left-generate" },
    );
    setTimeout(() => controller.abort(), 100);
    await expect(pending).rejects.toMatchObject({ name: "AbortError" });
    await new Promise((r) => setTimeout(r, 100));
    await scheduler.whenIdle();
    expect(scheduler.model.stats.forwardCalls - before).toBeLessThan(900);
    const usage = await client.leftUsage("req-left-generate");
    expect(usage!.prompt_tokens).toBeGreaterThan(0);
    expect(usage!.completion_tokens).toBeGreaterThan(0);
  });

  it("health lists the models", async () => {
    expect(await client.health()).toMatchObject({ status: "ok", models: engine.models });
  });
});

describe("internal inference server, a reader that stops reading", () => {
  it("a client that leaves while the stream waits for it to drain ends the handler", async () => {
    // A stand-in engine whose events are large enough to fill the socket's buffers at once.
    let pulled = 0;
    let closed = false;
    const big = "x".repeat(64 * 1024);
    const fake = {
      models: ["m"],
      loadStats: async () => [],
      start: async (_input: unknown, opts: { signal?: AbortSignal }) =>
        (async function* () {
          try {
            for (;;) {
              if (opts.signal?.aborted) throw Object.assign(new Error("aborted"), { name: "AbortError" });
              pulled++;
              yield { type: "delta" as const, index: 0, text: big };
            }
          } finally {
            closed = true;
          }
        })(),
    } as unknown as Engine;
    const stalled = await startInferenceServer({ engine: fake, secret, log: () => {}, keepAliveMs: 60 });
    try {
      const { request } = await import("node:http");
      const req = request(`${stalled.url}/generate-stream`, {
        method: "POST",
        headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
      });
      const response = new Promise<import("node:http").IncomingMessage>((r) => req.once("response", r));
      req.on("error", () => {});
      req.end("{}");
      (await response).pause(); // read nothing: the server's writes back up
      // The server stops pulling events once its writes wait for 'drain'.
      await expect
        .poll(async () => {
          const before = pulled;
          await new Promise((r) => setTimeout(r, 150));
          return pulled === before && pulled > 0;
        })
        .toBe(true);
      req.destroy();
      // Its loop wakes up, sees the cancellation and closes the events.
      await expect.poll(() => closed, { timeout: 3000 }).toBe(true);
    } finally {
      await stalled.close();
    }
  });
});
