import { describe, expect, it } from "vitest";
import type { GenerationRequestInput } from "../../contracts/generation";
import { InferenceError } from "../client";
import { UpstreamEventParser } from "./upstream";

const request = (extra: Partial<GenerationRequestInput> = {}) =>
  ({ model: "m", prompt: "p", ...extra }) as GenerationRequestInput;

/** One OpenAI text-completion chunk as vLLM streams it. */
const event = (text: string, finish: string | null = null, index = 0) =>
  `data: ${JSON.stringify({
    id: "cmpl-1",
    object: "text_completion",
    model: "m",
    choices: [{ index, text, logprobs: null, finish_reason: finish }],
  })}\n\n`;
const usage = (p: number, c: number) =>
  `data: ${JSON.stringify({ id: "cmpl-1", choices: [], usage: { prompt_tokens: p, completion_tokens: c, total_tokens: p + c } })}\n\n`;

describe("the upstream's server-sent events", () => {
  it("several events in one read come out as one group, the deltas of a choice joined, in order", () => {
    const parser = new UpstreamEventParser(request(), "vLLM");
    const got = parser.push(
      event("Hel") + event("lo") + event(",") + event(" world", "length") + usage(3, 4) + "data: [DONE]\n\n",
    );
    expect(got).toEqual([
      { type: "delta", index: 0, text: "Hello, world" },
      { type: "finish", index: 0, finish_reason: "length", stop: null },
    ]);
    expect(parser.sawDone).toBe(true);
    expect(parser.end()).toEqual([
      { type: "done", usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } },
    ]);
  });

  it("one event per read comes out at once, alone", () => {
    const parser = new UpstreamEventParser(request(), "vLLM");
    expect(parser.push(event("a"))).toEqual([{ type: "delta", index: 0, text: "a" }]);
    expect(parser.push(event("b"))).toEqual([{ type: "delta", index: 0, text: "b" }]);
  });

  it("an event split over two reads (anywhere, \\r\\n or not) comes out with the second", () => {
    const whole = event("first") + event(" second").replace(/\n/g, "\r\n") + event(" third", "stop");
    for (let cut = 1; cut < whole.length; cut++) {
      const parser = new UpstreamEventParser(request(), "vLLM");
      const a = parser.push(whole.slice(0, cut));
      const b = parser.push(whole.slice(cut));
      const text = [...a, ...b].map((e) => (e.type === "delta" ? e.text : "")).join("");
      expect(text, `cut at ${cut}`).toBe("first second third");
      // Nothing arrives before the line that ends its event: the first read holds only whole events.
      const firstWhole = whole.slice(0, cut).lastIndexOf("\n");
      const complete = whole.slice(0, firstWhole + 1).match(/^data:/gm)?.length ?? 0;
      expect(a.filter((e) => e.type === "delta").length, `cut at ${cut}`).toBe(Math.min(complete, 1));
      expect([...a, ...b].at(-1)).toEqual({ type: "finish", index: 0, finish_reason: "stop", stop: null });
    }
  });

  it("keeps the deltas of different choices apart, and those with logprobs when they were asked for", () => {
    const parser = new UpstreamEventParser(request({ n: 2, logprobs: 1 }), "vLLM");
    const lp = (token: string) =>
      `data: ${JSON.stringify({
        choices: [
          {
            index: 1,
            text: token,
            logprobs: { tokens: [token], token_logprobs: [-0.5], top_logprobs: [{ [token]: -0.5 }] },
          },
        ],
      })}\n\n`;
    const got = parser.push(event("x", null, 0) + event("y", null, 1) + event("z", null, 0) + lp("p") + lp("q"));
    expect(got.map((e) => (e.type === "delta" ? [e.index, e.text, e.logprobs?.length ?? 0] : e.type))).toEqual([
      [0, "x", 0],
      [1, "y", 0],
      [0, "z", 0],
      [1, "p", 1],
      [1, "q", 1],
    ]);
    expect(got[3]).toMatchObject({ logprobs: [{ token: "p", token_id: -1, logprob: -0.5 }] });
  });

  it("takes `data:` without a space, skips comments, event names and what follows [DONE]", () => {
    const parser = new UpstreamEventParser(request(), "TGI");
    const got = parser.push(
      ': keep-alive\n\nevent: message\ndata:{"choices":[{"index":0,"text":"ok","finish_reason":"stop"}]}\n\n' +
        "data: [DONE]\n\n" +
        event("late"),
    );
    expect(got).toEqual([
      { type: "delta", index: 0, text: "ok" },
      { type: "finish", index: 0, finish_reason: "stop", stop: null },
    ]);
    // No usage from the server: the tokens counted from the stream, no prompt tokens.
    expect(parser.end()).toEqual([
      { type: "done", usage: { prompt_tokens: 0, completion_tokens: 1, total_tokens: 1 } },
    ]);
  });

  it("the end finishes the choices the upstream left open after [DONE], and refuses a stream cut short", () => {
    const done = new UpstreamEventParser(request({ n: 2 }), "vLLM");
    done.push(event("a", "stop", 0) + "data: [DONE]\n\n");
    expect(done.end().map((e) => e.type + ("index" in e ? e.index : ""))).toEqual(["finish1", "done"]);

    const cut = new UpstreamEventParser(request(), "vLLM");
    cut.push(event("a"));
    expect(() => cut.end()).toThrow(InferenceError);
  });

  it("an error event is an InferenceError naming the backend", () => {
    const parser = new UpstreamEventParser(request(), "llama.cpp");
    expect(() => parser.push('data: {"error":{"message":"out of memory"}}\n\n')).toThrow(
      "the llama.cpp upstream failed: out of memory",
    );
  });
});
