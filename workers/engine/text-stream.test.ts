// Incremental detokenizer, stop strings and streaming equality.
import { beforeAll, describe, expect, it } from "vitest";
import { IncrementalDetokenizer } from "./detokenizer";
import { Engine } from "./engine";
import type { LoadedModel } from "./model/load-model";
import { StopMatcher } from "./stop-matcher";
import { tinyModelDir } from "./testing/models";

let engine: Engine;
let model: LoadedModel;
beforeAll(async () => {
  engine = new Engine({ models: [await tinyModelDir()] });
  model = await engine.load();
});

const decode = (ids: number[]) => (ids.length ? model.tokenizer.decode(ids) : "");

describe("incremental detokenizer", () => {
  it("never splits a multi-byte character across deltas", () => {
    const text = "Café 東京 😀 naïve";
    const ids = model.tokenizer.encode(text);
    expect(ids.length).toBeGreaterThan([...text].length - 2); // many byte-level tokens
    const detok = new IncrementalDetokenizer(decode);
    const deltas = ids.map((id) => detok.push(id));
    deltas.push(detok.flush());
    for (const d of deltas) expect(d).not.toContain("\uFFFD");
    expect(deltas.join("")).toBe(text);
    expect(deltas.filter((d) => d === "").length).toBeGreaterThan(0); // bytes were held back
  });
});

describe("stop matcher", () => {
  it("holds back a possible stop prefix and drops the stop", () => {
    const m = new StopMatcher(["o w", "xyz"]);
    expect(m.push("hello")).toEqual({ emit: "hell", matched: null });
    expect(m.push(" ")).toEqual({ emit: "", matched: null });
    expect(m.push("world")).toEqual({ emit: "", matched: "o w" });
  });

  it("releases held text once it cannot be a stop, and at the end", () => {
    const m = new StopMatcher(["abc"]);
    expect(m.push("xab")).toEqual({ emit: "x", matched: null });
    expect(m.push("d")).toEqual({ emit: "abd", matched: null });
    expect(m.push("a")).toEqual({ emit: "", matched: null });
    expect(m.flush()).toBe("a");
  });

  it("the earliest of several stops wins", () => {
    expect(new StopMatcher(["cd", "b"]).push("abcd")).toEqual({ emit: "a", matched: "b" });
  });
});

describe("stop strings through the engine", () => {
  it("a stop spanning a token boundary ends generation before it", async () => {
    const base = await engine.generate({ prompt: "Once upon a time", max_tokens: 30, seed: 5, logprobs: 1 });
    const toks = base.choices[0].logprobs!.map((l) => l.token);
    // Find two adjacent tokens with visible text and build a stop from the end of one and the start of the next.
    const i = toks.findIndex(
      (t, k) =>
        k > 1 &&
        t.length >= 2 &&
        (toks[k + 1] ?? "").length >= 2 &&
        !t.includes("\uFFFD") &&
        !toks[k + 1].includes("\uFFFD"),
    );
    expect(i).toBeGreaterThan(0);
    const stop = toks[i].slice(-1) + toks[i + 1].slice(0, 1);
    const before = base.choices[0].text.indexOf(stop);
    expect(before).toBeGreaterThanOrEqual(0);
    const r = await engine.generate({ prompt: "Once upon a time", max_tokens: 30, seed: 5, stop: ["zzzz", stop] });
    expect(r.choices[0]).toMatchObject({ text: base.choices[0].text.slice(0, before), finish_reason: "stop", stop });
  });

  it("finish reason length when no stop matches, and the stop field is null", async () => {
    const r = await engine.generate({ prompt: "Once upon a time", max_tokens: 5, seed: 5, stop: ["\u0007never"] });
    expect(r.choices[0]).toMatchObject({ finish_reason: "length", stop: null });
  });
});

describe("streaming", () => {
  it("concatenated deltas equal the non-streamed text for the same seed", async () => {
    for (const [seed, stop] of [
      [1, []],
      [2, [" the"]],
      [3, ["e", ". "]],
      [4, []],
    ] as const) {
      const req = { prompt: "The market was full of", max_tokens: 40, seed, stop: [...stop] };
      const whole = await engine.generate(req);
      const deltas: string[] = [];
      for await (const d of engine.streamText(req)) deltas.push(d);
      expect(deltas.join("")).toBe(whole.choices[0].text);
      expect(deltas.length).toBeGreaterThan(1);
      for (const s of stop) expect(deltas.join("")).not.toContain(s);
    }
  });

  it("the event stream carries finish and usage", async () => {
    const events = [];
    for await (const e of await engine.start({ prompt: "Hello", max_tokens: 3, seed: 1 })) events.push(e);
    expect(events.at(-2)).toMatchObject({ type: "finish", index: 0 });
    expect(events.at(-1)).toMatchObject({ type: "done", usage: { completion_tokens: 3 } });
  });
});
