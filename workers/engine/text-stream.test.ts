// Incremental detokenizer, stop strings and streaming equality.
import { beforeAll, describe, expect, it } from "vitest";
import { IncrementalDetokenizer } from "./detokenizer";
import { Engine } from "./engine";
import type { LoadedModel } from "./model/load-model";
import { StopMatcher, type StopFeed } from "./stop-matcher";
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
    // Earliest by start, not by end: the longer stop began first.
    expect(new StopMatcher(["bc", "abcd"]).push("xabcd")).toEqual({ emit: "x", matched: "abcd" });
  });

  it("matches periodic stops across pushes after false starts (aab in aaab, abab in ababab)", () => {
    const m = new StopMatcher(["aab"]);
    expect(m.push("a")).toEqual({ emit: "", matched: null });
    expect(m.push("a")).toEqual({ emit: "", matched: null });
    expect(m.push("a")).toEqual({ emit: "a", matched: null });
    expect(m.push("b!")).toEqual({ emit: "", matched: "aab" });
    expect(new StopMatcher(["ababc"]).push("abababc")).toEqual({ emit: "ab", matched: "ababc" });
  });

  it("emits and matches exactly as a scan of all the text so far would, on random streams", () => {
    // The reference: every stop searched in everything not yet emitted, the longest prefix of a
    // stop that the text ends with held back.
    const reference = (stops: string[], pieces: string[]) => {
      let held = "";
      const out: StopFeed[] = [];
      for (const p of pieces) {
        held += p;
        let first = -1;
        let matched: string | null = null;
        for (const s of stops) {
          const at = held.indexOf(s);
          if (at >= 0 && (first < 0 || at < first)) [first, matched] = [at, s];
        }
        if (matched !== null) {
          out.push({ emit: held.slice(0, first), matched });
          return out;
        }
        let keep = 0;
        for (const s of stops)
          for (let k = Math.min(s.length - 1, held.length); k > keep; k--)
            if (held.endsWith(s.slice(0, k))) {
              keep = k;
              break;
            }
        out.push({ emit: held.slice(0, held.length - keep), matched: null });
        held = held.slice(held.length - keep);
      }
      return out;
    };
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const word = (max: number) => Array.from({ length: 1 + rand(max) }, () => "ab"[rand(2)]).join("");
    for (let run = 0; run < 2000; run++) {
      const stops = Array.from({ length: 1 + rand(3) }, () => word(5));
      const pieces = Array.from({ length: 1 + rand(12) }, () => word(3));
      const m = new StopMatcher(stops);
      const got: StopFeed[] = [];
      for (const p of pieces) {
        got.push(m.push(p));
        if (got.at(-1)!.matched !== null) break;
      }
      expect(got, JSON.stringify({ stops, pieces })).toEqual(reference(stops, pieces));
    }
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
