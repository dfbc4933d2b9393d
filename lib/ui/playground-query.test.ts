import { describe, expect, it } from "vitest";
import { parsePlaygroundSearch, toPlaygroundSearch } from "./playground-query";

describe("playground query", () => {
  it("round-trips every sampling parameter through the deployment body's schema", () => {
    const params = {
      prompt: "Once upon a time",
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
    };
    const parsed = parsePlaygroundSearch(new URLSearchParams(toPlaygroundSearch(params)));
    expect(parsed.success && parsed.data).toMatchObject(params);
  });

  it("refuses what the endpoint refuses, naming the parameter", () => {
    const cases: [string, string][] = [
      ["prompt=hi&temperature=1.5", "temperature"],
      ["prompt=hi&logprobs=9", "logprobs"],
      ["prompt=hi&max_tokens=", "max_tokens"],
      ["prompt=hi&n=2", "n"],
      ["prompt=hi&echo=true", "echo"],
      ["prompt=hi&tfs=1.5", "tfs"],
      [`prompt=hi&bad_words=${encodeURIComponent('[""]')}`, "bad_words"],
      ["prompt=hi&bad_words=darn", "bad_words"],
      [`prompt=hi&logit_bias=${encodeURIComponent('{"a":500}')}`, "logit_bias"],
      [`prompt=hi&logit_bias=${encodeURIComponent('["a"]')}`, "logit_bias"],
      ["prompt=hi&stream=true", "stream"],
      ["prompt=hi&bogus=1", "bogus"],
      ["temperature=0.5", "prompt"],
    ];
    for (const [search, param] of cases) {
      const parsed = parsePlaygroundSearch(new URLSearchParams(search));
      expect(parsed.success, search).toBe(false);
      const issue = parsed.error!.issues[0]!;
      expect([...issue.path, ...("keys" in issue ? issue.keys : [])].join("."), search).toContain(param);
    }
  });

  it("carries the save-to-pipeline choice as a pipeline id", () => {
    const search = toPlaygroundSearch({ prompt: "hi", pipeline: { id: "pipe_abc" } });
    expect(new URLSearchParams(search).get("pipeline")).toBe("pipe_abc");
    const parsed = parsePlaygroundSearch(new URLSearchParams(search));
    expect(parsed.success).toBe(true);
    expect(parsed.data!.pipeline).toMatchObject({ id: "pipe_abc" });
    expect(parsePlaygroundSearch(new URLSearchParams("prompt=hi&pipeline=")).success).toBe(false);
  });
});
