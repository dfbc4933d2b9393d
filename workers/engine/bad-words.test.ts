// bad_words: a property test over many seeds — the words never appear in the output, however
// the model would have tokenized them — while without the guard they do appear.
import { beforeAll, describe, expect, it } from "vitest";
import { BadWordsGuard, guardFor } from "./bad-words";
import { Engine } from "./engine";
import type { LoadedModel } from "./model/load-model";
import { tinyModelDir } from "./testing/models";
import { tokenTable } from "./token-table";

let engine: Engine;
let model: LoadedModel;
beforeAll(async () => {
  engine = new Engine({ models: [await tinyModelDir()] });
  model = await engine.load();
});

describe("bad_words", () => {
  it("bans tokens that complete a word started by the output so far", () => {
    const table = tokenTable(model.tokenizer, 0);
    const guard = new BadWordsGuard(table, ["the"]);
    const the = model.tokenizer.encode(" the", { add_special_tokens: false });
    expect(the).toHaveLength(1);
    expect(guard.alwaysBanned).toContain(the[0]);
    const afterT = guard.bannedAfter(new TextEncoder().encode("at"));
    const he = model.tokenizer.encode("he", { add_special_tokens: false });
    expect(he).toHaveLength(1);
    expect(afterT).toContain(he[0]);
    expect(guard.bannedAfter(new TextEncoder().encode("ax"))).not.toContain(he[0]);
  });

  it("makes a list's guard once: the next request with the same list reuses it, the 32 most recent kept", () => {
    const enc = new TextEncoder();
    const table = { bytes: ["a", "the", "then", "x"].map((t) => enc.encode(t)) };
    const first = guardFor(table, ["the"]);
    expect(first.alwaysBanned).toEqual([1, 2]);
    expect(guardFor(table, ["the"])).toBe(first);
    expect(guardFor(table, ["the", "x"])).not.toBe(first);
    expect(guardFor(table, []).alwaysBanned).toEqual([]);
    for (let i = 0; i < 32; i++) guardFor(table, [`w${i}`]);
    expect(guardFor(table, ["the"])).not.toBe(first); // pushed out by 32 newer lists
  });

  it("bans exactly what a brute-force check bans, for self-overlapping words and random tails", () => {
    const table = tokenTable(model.tokenizer, 0);
    const words = ["aaaa", "abab", "the", "a the", "ing"];
    const guard = new BadWordsGuard(table, words);
    const enc = new TextEncoder();
    const bw = words.map((w) => enc.encode(w));
    /** Token ids t such that tail + bytes(t) contains a word that tail alone does not end inside. */
    const bruteForce = (tail: Uint8Array) => {
      const out = new Set<number>();
      table.bytes.forEach((b, id) => {
        for (const w of bw) {
          for (let k = 1; k < w.length && k <= tail.length; k++) {
            const endsWithPrefix = w.subarray(0, k).every((x, i) => tail[tail.length - k + i] === x);
            const rest = w.subarray(k);
            if (endsWithPrefix && b.length >= rest.length && rest.every((x, i) => b[i] === x)) out.add(id);
          }
        }
      });
      return [...out].sort((x, y) => x - y);
    };
    let rng = 7;
    const next = () => (rng = (rng * 1103515245 + 12345) % 2 ** 31);
    const alphabet = enc.encode("ab theing");
    for (let i = 0; i < 60; i++) {
      const tail = Uint8Array.from({ length: next() % (guard.maxTail + 1) }, () => alphabet[next() % alphabet.length]!);
      expect(
        [...new Set(guard.bannedAfter(tail))].sort((x, y) => x - y),
        new TextDecoder().decode(tail),
      ).toEqual(bruteForce(tail));
    }
  });

  it("property: over 40 seeds, none of the words ever appears in the output", async () => {
    const words = ["the", " a", "e ", "in", "ou"];
    let baselineHits = 0;
    for (let seed = 0; seed < 40; seed++) {
      const prompt = seed % 2 ? "The children played in" : "She said that";
      const req = { prompt, max_tokens: 30, seed, temperature: 1 };
      const free = (await engine.generate(req)).choices[0].text;
      if (words.some((w) => free.includes(w))) baselineHits++;
      const r = await engine.generate({ ...req, bad_words: words, n: 2 });
      for (const c of r.choices)
        for (const w of words)
          expect(c.text, `seed ${seed}: ${JSON.stringify(c.text)} contains ${JSON.stringify(w)}`).not.toContain(w);
    }
    expect(baselineHits).toBeGreaterThan(30); // the words are likely output without the guard
  });

  it("a word cannot be completed across the prompt/output boundary", async () => {
    for (let seed = 0; seed < 10; seed++) {
      const r = await engine.generate({ prompt: "in t", max_tokens: 10, seed, bad_words: ["the"], echo: true });
      expect(r.choices[0].text.startsWith("in t")).toBe(true);
      expect(r.choices[0].text).not.toContain("the");
    }
  });
});
