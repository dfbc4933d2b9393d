// Text is the tokens' own bytes, whatever the tokenizer's `clean_up_tokenization_spaces` says
// (true in many exports, Llama 3's among them; transformers.js applies it on decode when the
// caller does not say otherwise): clean-up drops the space of " ," " ." " 's" …, which would
// break bad_words (checked on the raw bytes) and the streamed deltas (prefixes of each other).
import { cp, mkdtemp, readFile, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engine } from "./engine";
import { tinyModelDir } from "./testing/models";

let raw: Engine;
let cleaned: Engine;
beforeAll(async () => {
  const src = await tinyModelDir();
  const dir = await mkdtemp(path.join(os.tmpdir(), "lmp-cleanup-"));
  await cp(src, dir, { recursive: true });
  const config = path.join(dir, "tokenizer_config.json");
  const json = JSON.parse(await readFile(config, "utf8"));
  await writeFile(config, JSON.stringify({ ...json, clean_up_tokenization_spaces: true }));
  raw = new Engine({ models: [src] });
  cleaned = new Engine({ models: [dir] });
  await Promise.all([raw.load(), cleaned.load()]);
}, 120_000);
afterAll(async () => {
  await Promise.all([raw?.dispose(), cleaned?.dispose()]);
});

const CLEANED = [" .", " ,", " !", " ?", " 's", " n't", " 'm", " 've", " 're"];

describe("decoding", () => {
  it("gives the same text (its streamed deltas added up) and token strings with clean_up_tokenization_spaces on", async () => {
    let cleanable = 0;
    for (let seed = 0; seed < 12; seed++) {
      const req = { prompt: "She said", max_tokens: 100, seed, temperature: 1, logprobs: 1 };
      const a = (await raw.generate(req)).choices[0];
      const b = (await cleaned.generate(req)).choices[0];
      expect(b.text).toBe(a.text);
      expect(b.logprobs!.map((t) => t.token)).toEqual(a.logprobs!.map((t) => t.token));
      if (CLEANED.some((p) => a.text.includes(p))) cleanable++;
    }
    // The texts held what clean-up changes (else this test could not tell the two apart).
    expect(cleanable).toBeGreaterThan(0);
  }, 120_000);
});
