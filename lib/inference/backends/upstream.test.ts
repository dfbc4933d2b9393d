import { describe, expect, it, vi } from "vitest";
import type { GenerationRequestInput } from "../../contracts/generation";
import { collectGarbage } from "../../gc";
import { InferenceError } from "../client";
import { MAX_LINE_CHARS, UpstreamEventParser } from "./upstream";

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

describe("an upstream that gives up on a choice", () => {
  it("is a failure (finish_reason abort or error), not an answer that ended", () => {
    for (const reason of ["abort", "error"]) {
      const parser = new UpstreamEventParser(request(), "vLLM");
      expect(parser.push(event("partial"))).toEqual([{ type: "delta", index: 0, text: "partial" }]);
      // Before: a "stop", and the partial text taken as complete (and captured).
      expect(() => parser.push(event("", reason))).toThrow(
        expect.objectContaining({ status: 502, message: expect.stringContaining(`finish_reason "${reason}"`) }),
      );
    }
  });
});

describe("an upstream that sends too much", () => {
  it("is cut at a line past MAX_LINE_CHARS, however it arrives", () => {
    const parser = new UpstreamEventParser(request(), "vLLM");
    expect(parser.push(event("ok"))).toEqual([{ type: "delta", index: 0, text: "ok" }]);
    const read = "a".repeat(64 * 1024);
    const push = () => {
      parser.push('data: {"choices":[{"index":0,"text":"');
      for (let i = 0; i < MAX_LINE_CHARS / read.length + 1; i++) parser.push(read);
    };
    // Before: kept growing (and scanned again at every read) for as long as the upstream sent.
    expect(push).toThrow(
      expect.objectContaining({ status: 502, message: expect.stringMatching(/a line longer than/) }),
    );
  });

  it("is cut once it streams far past max_tokens × n pieces", () => {
    const parser = new UpstreamEventParser(request({ max_tokens: 4, n: 2 }), "vLLM");
    let pieces = 0;
    const more = () => {
      for (; pieces < 1000; pieces++) parser.push(event("x", null, pieces % 2));
    };
    expect(more).toThrow(
      expect.objectContaining({ status: 502, message: expect.stringMatching(/more than 32 pieces/) }),
    );
    expect(pieces).toBe(32);
  });
});

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
    done.push(event("a", "stop", 0) + event("b", null, 1) + "data: [DONE]\n\n");
    expect(done.end().map((e) => e.type + ("index" in e ? e.index : ""))).toEqual(["finish1", "done"]);
    // A choice it never sent a word of (a server that ignores n) is not an empty answer.
    const short = new UpstreamEventParser(request({ n: 2 }), "vLLM");
    short.push(event("a", "stop", 0) + "data: [DONE]\n\n");
    expect(() => short.end()).toThrow("the vLLM upstream sent 1 of the 2 choices asked for");

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

  it("llama.cpp's `error:` line (then [DONE]) is a failure, not an empty answer that finished", () => {
    const parser = new UpstreamEventParser(request(), "llama.cpp");
    expect(parser.push(event("Once"))).toEqual([{ type: "delta", index: 0, text: "Once" }]);
    const failed =
      'error: {"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}\n\n' +
      "data: [DONE]\n\n";
    expect(() => parser.push(failed)).toThrow(
      "the llama.cpp upstream failed: the request exceeds the available context size",
    );
    const plain = new UpstreamEventParser(request(), "llama.cpp");
    expect(() => plain.push("error: slot unavailable\n")).toThrow("the llama.cpp upstream failed: slot unavailable");
  });
});

describe("the upstream's repeated delta events (parsed from their template)", () => {
  /** A small seeded generator, so that a failure can be replayed. */
  const random = (seed: number) => () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const PIECES = [
    "a",
    " tok",
    "é",
    "😀",
    '"',
    "\\",
    "\n",
    "\t",
    "/",
    "\u0000",
    '","finish_reason":"stop',
    "}]}",
    "\\u0022",
    " ",
  ];
  /** A string literal for `text`, sometimes with escapes JSON.stringify would not write. */
  const literal = (text: string, rnd: () => number) =>
    rnd() < 0.2
      ? `"${[...text].map((ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`).join("")}"`
      : JSON.stringify(text);

  type Shape = (lit: string, k: number, index: number) => string;
  const SHAPES: Record<string, Shape> = {
    vllm: (lit, _k, index) =>
      `{"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"m","choices":[{"index":${index},"text":${lit},"logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}`,
    llamacpp: (lit, _k, index) =>
      `{"choices":[{"text":${lit},"index":${index},"logprobs":null,"finish_reason":null}],"created":1700000000,"model":"m","object":"text_completion","id":"cmpl-x"}`,
    chat: (lit, _k, index) =>
      `{"id":"c","object":"chat.completion.chunk","choices":[{"index":${index},"delta":{"content":${lit}},"logprobs":null,"finish_reason":null}]}`,
    spaced: (lit, _k, index) =>
      `{"id": "x", "choices": [ {"index": ${index}, "text" :  ${lit} , "finish_reason": null} ]}`,
    idPerEvent: (lit, k, index) =>
      `{"id":"cmpl-${k}","choices":[{"index":${index},"text":${lit},"finish_reason":null}]}`,
    duplicateKey: (lit, _k, index) => `{"choices":[{"index":${index},"text":"dup","text":${lit}}]}`,
    nested: (lit, _k, index) =>
      `{"meta":{"text":"not this"},"choices":[{"index":${index},"text":${lit},"extra":{"text":"nor this"}}]}`,
  };

  /** The events a parser must give for these data lines: each parsed whole, as the spec of the dialect says. */
  const oracle = (lines: string[]) => {
    const text = new Map<number, string>();
    const finishes: string[] = [];
    let counted = 0;
    let usage: unknown;
    for (const line of lines) {
      const chunk = JSON.parse(line) as {
        choices?: { index?: number; text?: string; delta?: { content?: string }; finish_reason?: string | null }[];
        usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
      };
      for (const c of chunk.choices ?? []) {
        const t = c.text ?? c.delta?.content ?? "";
        if (t) {
          counted++;
          text.set(c.index ?? 0, (text.get(c.index ?? 0) ?? "") + t);
        }
        if (c.finish_reason && !finishes.some((f) => f.startsWith(`${c.index ?? 0}:`)))
          finishes.push(`${c.index ?? 0}:${c.finish_reason}`);
      }
      if (chunk.usage) usage = chunk.usage;
    }
    return { text, finishes, usage: usage ?? { prompt_tokens: 0, completion_tokens: counted, total_tokens: counted } };
  };

  it("give the same events as parsing every event whole, for every dialect, escape and read split", () => {
    for (let seed = 1; seed <= 300; seed++) {
      const rnd = random(seed);
      const names = Object.keys(SHAPES);
      const shape = SHAPES[names[seed % names.length]!]!;
      const n = rnd() < 0.2 ? 2 : 1;
      const lines: string[] = [];
      const count = Math.max(n, 1 + Math.floor(rnd() * 40));
      for (let k = 0; k < count; k++) {
        // n = 2: each choice sent at least once (first choice 1, then 0), then either.
        const index = n === 2 && k < 2 ? 1 - k : n === 2 && rnd() < 0.5 ? 1 : 0;
        let text = "";
        for (let p = Math.floor(rnd() * 4); p >= 0; p--) text += PIECES[Math.floor(rnd() * PIECES.length)];
        if (rnd() < 0.05) text = "";
        const roll = rnd();
        if (roll < 0.04)
          lines.push(`{"choices":[{"index":${index},"text":${JSON.stringify(text)},"finish_reason":"stop"}]}`);
        else if (roll < 0.07)
          lines.push(`{"choices":[{"index":${index},"text":"lp","logprobs":{"tokens":["lp"],"token_logprobs":[-1]}}]}`);
        else if (roll < 0.1) lines.push(shape(literal(text, rnd), k, index).replace('"cmpl-', '"other-'));
        else lines.push(shape(literal(text, rnd), k, index));
      }
      lines.push(`{"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":${count},"total_tokens":${count + 2}}}`);
      const wire = lines.map((l) => `data: ${l}\n\n`).join("") + "data: [DONE]\n\n";

      const parser = new UpstreamEventParser(request({ n }), "vLLM");
      const events = [];
      for (let at = 0; at < wire.length;) {
        const next = Math.min(wire.length, at + 1 + Math.floor(rnd() * 400));
        events.push(...parser.push(wire.slice(at, next)));
        at = next;
      }
      const want = oracle(lines);
      const text = new Map<number, string>();
      for (const e of events) if (e.type === "delta") text.set(e.index, (text.get(e.index) ?? "") + e.text);
      expect(text, `seed ${seed}`).toEqual(want.text);
      const finishes = events.flatMap((e) => (e.type === "finish" ? [`${e.index}:${e.finish_reason}`] : []));
      expect(finishes, `seed ${seed}`).toEqual(want.finishes);
      expect(parser.end().at(-1), `seed ${seed}`).toEqual({ type: "done", usage: want.usage });
    }
  });

  it("an event that only looks like the template (its text's place holding more than one literal) is parsed whole", () => {
    const parser = new UpstreamEventParser(request(), "vLLM");
    const head = '{"id":"cmpl-1","choices":[{"index":0,"text":';
    const tail = ',"logprobs":null,"finish_reason":null}]}';
    // After the template: the same head and tail, with members smuggled in between.
    const sneaky = `${head}"b","logprobs":null,"finish_reason":"stop","x":"y"${tail}`;
    expect(JSON.parse(sneaky).choices[0]).toMatchObject({ text: "b", finish_reason: null });
    const finishing = `${head}"c","finish_reason":"length","x":null${tail.replace('"finish_reason":null', '"y":null')}`;
    expect(JSON.parse(finishing).choices[0]).toMatchObject({ text: "c", finish_reason: "length" });
    const got = parser.push(
      [`${head}"a"${tail}`, `${head}"a2"${tail}`, sneaky, finishing].map((l) => `data: ${l}\n\n`).join(""),
    );
    expect(got).toEqual([
      { type: "delta", index: 0, text: "a" + "a2" + "b" + "c" },
      { type: "finish", index: 0, finish_reason: "length", stop: null },
    ]);
  });

  it("parse only the text of events that repeat their template, and stop trying on a stream whose events differ", () => {
    const whole = (lines: string[]) => {
      const spy = vi.spyOn(JSON, "parse");
      try {
        const parser = new UpstreamEventParser(request({ max_tokens: lines.length }), "vLLM");
        const events = parser.push(lines.map((l) => `data: ${l}\n\n`).join(""));
        const text = events.map((e) => (e.type === "delta" ? e.text : "")).join("");
        // Whole events (and probes) against the text literals alone.
        return { text, parsed: spy.mock.calls.filter(([arg]) => String(arg).length > 40).length };
      } finally {
        spy.mockRestore();
      }
    };
    const texts = Array.from({ length: 100 }, (_, k) => ` t${k}`);
    const same = whole(texts.map((t) => SHAPES.vllm!(JSON.stringify(t), 0, 0)));
    expect(same.text).toBe(texts.join(""));
    expect(same.parsed).toBe(3); // the first event, and the two probes of its template
    const differing = whole(texts.map((t, k) => SHAPES.idPerEvent!(JSON.stringify(t), k, 0)));
    expect(differing.text).toBe(texts.join(""));
    expect(differing.parsed).toBe(100 + 2); // every event, and one template's probes
  });

  it("a slot that a later duplicate key overrides is not the text, even when that key holds a probe's value", () => {
    const parser = new UpstreamEventParser(request(), "vLLM");
    const line = (text: string) =>
      `data: {"choices":[{"index":0,"text":${JSON.stringify(text)},"text":"\\u0000slot"}]}\n\n`;
    const got = parser.push(line("a") + line("b") + line("c"));
    expect(got).toEqual([{ type: "delta", index: 0, text: "\u0000slot".repeat(3) }]);
  });

  /** The heap that 200 results of `make` keep alive, each made from a network read of 100 kB. */
  const retained = (make: (i: number) => unknown) => {
    const heap = () => {
      collectGarbage();
      return process.memoryUsage().heapUsed;
    };
    const kept: unknown[] = [];
    const before = heap();
    for (let i = 0; i < 200; i++) kept.push(make(i));
    const grown = heap() - before;
    expect(kept).toHaveLength(200);
    return grown;
  };

  it("a template does not keep the network read it was cut from alive", () => {
    const grown = retained((i) => {
      const parser = new UpstreamEventParser(request(), "vLLM");
      // A comment, then the plain event the template is made of.
      parser.push(`: ${String(i).padStart(6, "0")}${"x".repeat(100_000)}\n\n` + event(`t${i}`));
      expect(parser.push(event(" again"))).toEqual([{ type: "delta", index: 0, text: " again" }]);
      return parser;
    });
    // 200 reads of 100 kB would be 20 MB.
    expect(grown).toBeLessThan(4_000_000);
  });

  it("a text read from a template's slot does not keep its network read alive either", () => {
    const grown = retained((i) => {
      const parser = new UpstreamEventParser(request(), "vLLM");
      parser.push(event("first"));
      // A comment, then an event whose text (a captured completion's) outlives the read.
      const got = parser.push(`: ${"x".repeat(100_000)}\n\n` + event(` a longer text of its own ${i}`));
      expect(got).toEqual([{ type: "delta", index: 0, text: ` a longer text of its own ${i}` }]);
      return (got[0] as { text: string }).text;
    });
    expect(grown).toBeLessThan(4_000_000);
  });

  it("a text with a raw control character fails as parsing the event whole does, template or not", () => {
    const parser = new UpstreamEventParser(request(), "vLLM");
    expect(parser.push(event("a") + event("b"))).toEqual([{ type: "delta", index: 0, text: "ab" }]);
    const raw = event("c\t").replace("\\t", "\t");
    expect(() => JSON.parse(raw.slice(6))).toThrow(SyntaxError);
    expect(() => parser.push(raw)).toThrow(SyntaxError);
  });
});
