import { describe, expect, it } from "vitest";
import type { GeneratedTokenLogprobs, GenerationStreamEvent } from "../contracts/generation";
import { chatLogprobs, pieces, textLogprobs, type Piece } from "./openai-completions";

const lp = (token: string, logprob = -1): GeneratedTokenLogprobs => ({
  token,
  token_id: token.length,
  logprob,
  top_logprobs: [
    { token: "a", token_id: 1, logprob: -0.5 },
    { token: token, token_id: token.length, logprob },
  ],
});
const delta = (text: string, token?: string): GenerationStreamEvent => ({
  type: "delta",
  index: 0,
  text,
  ...(token !== undefined ? { logprobs: [lp(token)] } : {}),
});
const usage = { prompt_tokens: 1, completion_tokens: 3, total_tokens: 4 };

async function all(events: GenerationStreamEvent[], withLogprobs = true): Promise<Piece[]> {
  async function* source() {
    yield* events;
  }
  const out: Piece[] = [];
  for await (const p of pieces(source(), withLogprobs)) out.push(p);
  return out;
}
const texts = (ps: Piece[]) =>
  ps.flatMap((p) => (p.type === "text" ? [[p.text, (p.tokens ?? []).map((t) => t.text)] as const] : []));

describe("pieces", () => {
  it("passes text through at once without logprobs", async () => {
    const ps = await all([delta("a"), delta(""), delta("b"), { type: "done", usage }], false);
    expect(texts(ps)).toEqual([
      ["a", []],
      ["b", []],
    ]);
  });

  it("pairs each token with the text it added, held-back text going to the token that released it", async () => {
    const ps = await all([
      delta(" x", " x"),
      delta("", "\uFFFD"), // half a character: held back by the engine
      delta("é", "\uFFFD"), // the character, released with the next byte
      delta(" y", " y"),
      { type: "finish", index: 0, finish_reason: "length", stop: null },
      { type: "done", usage },
    ]);
    expect(texts(ps)).toEqual([
      [" x", [" x", ""]],
      ["é", ["é"]],
      [" y", [" y"]],
    ]);
    expect(ps.at(-2)).toEqual({ type: "finish", index: 0, finish_reason: "length", stop: null });
  });

  it("adds text released at the end to the last token, and drops tokens a stop string swallowed", async () => {
    const flushed = await all([
      delta(" x", " x"),
      delta("", " s"),
      delta(" s"), // the end released what a stop string might have started
      { type: "finish", index: 0, finish_reason: "stop", stop: null },
    ]);
    expect(texts(flushed)).toEqual([[" x s", [" x", " s"]]]);
    const stopped = await all([
      delta(" x", " x"),
      delta("", " STOP"),
      { type: "finish", index: 0, finish_reason: "stop", stop: " STOP" },
    ]);
    expect(texts(stopped)).toEqual([[" x", [" x"]]]);
  });

  it("builds OpenAI's logprobs objects from the tokens", () => {
    const tokens = [
      { text: "ab", entry: lp("ab", -2) },
      { text: "c", entry: lp("c", -0.25) },
    ];
    expect(textLogprobs(tokens, 3, 1)).toEqual({
      tokens: ["ab", "c"],
      token_logprobs: [-2, -0.25],
      top_logprobs: [
        { a: -0.5, ab: -2 },
        { a: -0.5, c: -0.25 },
      ],
      text_offset: [3, 5],
    });
    expect(textLogprobs(tokens, 0, 0).top_logprobs).toEqual([{ ab: -2 }, { c: -0.25 }]);
    // Tokens named like an object's own properties (code models meet them) are tokens like any other.
    const named: GeneratedTokenLogprobs = {
      token_id: 1,
      token: "constructor",
      logprob: -0.1,
      top_logprobs: [
        { token: "__proto__", token_id: 2, logprob: -0.2 },
        { token: "toString", token_id: 3, logprob: -0.3 },
      ],
    };
    const [top] = textLogprobs([{ text: "constructor", entry: named }], 0, 2).top_logprobs;
    expect(JSON.parse(JSON.stringify(top))).toEqual(
      JSON.parse('{"__proto__":-0.2,"toString":-0.3,"constructor":-0.1}'),
    );
    expect(chatLogprobs([{ text: "é", entry: lp("é", -1) }], 1)).toEqual({
      content: [
        { token: "é", logprob: -1, bytes: [0xc3, 0xa9], top_logprobs: [{ token: "a", logprob: -0.5, bytes: [97] }] },
      ],
    });
  });
});
