import { describe, expect, it } from "vitest";
import { PlaygroundBody } from "./playground-query";

describe("playground body", () => {
  it("takes every sampling parameter of the deployment endpoint, and a prompt of any length", () => {
    const params = {
      prompt: "長".repeat(20_000),
      max_tokens: 32,
      temperature: 0.7,
      top_p: 0.9,
      top_k: 40,
      repetition_penalty: 1.2,
      seed: 7,
      logprobs: 3,
      tfs: 0.95,
      stop: ["\n", "The end"],
      bad_words: ["darn", " heck"],
      logit_bias: { " the": -100, "464": 5 },
      pipeline: { id: "pipe_abc" },
    };
    const parsed = PlaygroundBody.safeParse(params);
    expect(parsed.success && parsed.data).toMatchObject(params);
    const atLimits = {
      prompt: "hi",
      stop: ["x".repeat(1000)],
      logit_bias: Object.fromEntries(Array.from({ length: 1024 }, (_, i) => [String(i), 1])),
    };
    expect(PlaygroundBody.safeParse(atLimits).success).toBe(true);
  });

  it("refuses what the endpoint refuses, and what the playground leaves out, naming the parameter", () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ prompt: "hi", temperature: 1.5 }, "temperature"],
      [{ prompt: "hi", logprobs: 9 }, "logprobs"],
      [{ prompt: "hi", max_tokens: "" }, "max_tokens"],
      [{ prompt: "hi", n: 2 }, "n"],
      [{ prompt: "hi", echo: true }, "echo"],
      [{ prompt: "hi", tfs: 1.5 }, "tfs"],
      [{ prompt: "hi", bad_words: [""] }, "bad_words"],
      [{ prompt: "hi", bad_words: "darn" }, "bad_words"],
      [{ prompt: "hi", logit_bias: { a: 500 } }, "logit_bias"],
      [{ prompt: "hi", logit_bias: ["a"] }, "logit_bias"],
      [{ prompt: "hi", stream: true }, "stream"],
      [{ prompt: "hi", bogus: 1 }, "bogus"],
      [{ prompt: "hi", pipeline: { id: "" } }, "pipeline"],
      [{ temperature: 0.5 }, "prompt"],
      // Bounds on what the worker does per request before generating, and per token.
      [{ prompt: "hi", stop: ["x".repeat(1001)] }, "stop"],
      [{ prompt: "hi", logit_bias: { ["a".repeat(129)]: 1 } }, "logit_bias"],
      [
        { prompt: "hi", logit_bias: Object.fromEntries(Array.from({ length: 1025 }, (_, i) => [String(i), 1])) },
        "logit_bias",
      ],
    ];
    for (const [body, param] of cases) {
      const parsed = PlaygroundBody.safeParse(body);
      expect(parsed.success, JSON.stringify(body)).toBe(false);
      const issue = parsed.error!.issues[0]!;
      expect([...issue.path, ...("keys" in issue ? issue.keys : [])].join("."), JSON.stringify(body)).toContain(param);
    }
  });
});
