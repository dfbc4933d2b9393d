// bad_words: a property test over many seeds — the words never appear in the output, however
// the model would have tokenized them — while without the guard they do appear.
import { beforeAll, describe, expect, it } from "vitest";
import { BadWordsGuard } from "./bad-words";
import { Engine } from "./engine";
import type { LoadedModel } from "./model-loader";
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
