// WORKER_SERVES: which deployed models a worker loads.
import { describe, expect, it } from "vitest";
import { parsePlacements, places } from "./placement";

describe("WORKER_SERVES placements", () => {
  it("matches model ids and paths by glob, and the dtype after @ when one is named", () => {
    const p = parsePlacements(" Qwen/* , meta-llama/Llama-3.2-1B@q4,/models/*.v2 ");
    expect(p.map((e) => e.text)).toEqual(["Qwen/*", "meta-llama/Llama-3.2-1B@q4", "/models/*.v2"]);
    expect(places(p, { model: "Qwen/Qwen2.5-0.5B-Instruct", dtype: "auto" })).toBe(true);
    expect(places(p, { model: "Qwen", dtype: "auto" })).toBe(false); // the slash is part of the glob
    expect(places(p, { model: "meta-llama/Llama-3.2-1B", dtype: "q4" })).toBe(true);
    expect(places(p, { model: "meta-llama/Llama-3.2-1B", dtype: "fp32" })).toBe(false);
    expect(places(p, { model: "meta-llama/Llama-3.2-1B-Instruct", dtype: "q4" })).toBe(false); // whole id
    expect(places(p, { model: "/models/a/b.v2", dtype: "fp16" })).toBe(true); // * spans slashes
    expect(places(p, { model: "/models/ab-v2", dtype: "fp16" })).toBe(false); // . is a dot
    expect(places(parsePlacements("*@q4"), { model: "any/thing", dtype: "q4" })).toBe(true);
    expect(places(parsePlacements("*@q4"), { model: "any/thing", dtype: "auto" })).toBe(false);
  });

  it("serves every model when unset or empty", () => {
    for (const v of [undefined, "", " , "]) {
      expect(parsePlacements(v)).toEqual([]);
      expect(places(parsePlacements(v), { model: "org/m", dtype: "fp32" })).toBe(true);
    }
  });

  it("refuses an entry without a model or with an unknown dtype, naming it", () => {
    expect(() => parsePlacements("org/*,@q4")).toThrow(/entry "@q4" names no model/);
    expect(() => parsePlacements("org/m@q5")).toThrow(/entry "org\/m@q5": the dtype after @ must be one of auto, fp32/);
  });
});
