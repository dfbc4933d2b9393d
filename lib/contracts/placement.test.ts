// WORKER_SERVES: which deployed models a worker loads, and for which teams.
import { describe, expect, it } from "vitest";
import { servedModelKey, teamModelKey, withoutTeam } from "./models";
import { parsePlacements, places, placesByTeam } from "./placement";

const d = (model: string, dtype: string, teamSlug = "acme") => ({ model, dtype, teamSlug });

describe("WORKER_SERVES placements", () => {
  it("matches model ids and paths by glob, and the dtype after @ when one is named", () => {
    const p = parsePlacements(" Qwen/* , meta-llama/Llama-3.2-1B@q4,/models/*.v2 ");
    expect(p.map((e) => e.text)).toEqual(["Qwen/*", "meta-llama/Llama-3.2-1B@q4", "/models/*.v2"]);
    expect(places(p, d("Qwen/Qwen2.5-0.5B-Instruct", "auto"))).toBe(true);
    expect(places(p, d("Qwen", "auto"))).toBe(false); // the slash is part of the glob
    expect(places(p, d("meta-llama/Llama-3.2-1B", "q4"))).toBe(true);
    expect(places(p, d("meta-llama/Llama-3.2-1B", "fp32"))).toBe(false);
    expect(places(p, d("meta-llama/Llama-3.2-1B-Instruct", "q4"))).toBe(false); // the whole id
    expect(places(p, d("/models/a/b.v2", "fp16"))).toBe(true); // * spans slashes
    expect(places(p, d("/models/ab-v2", "fp16"))).toBe(false); // . is a dot
    expect(places(parsePlacements("*@q4"), d("any/thing", "q4"))).toBe(true);
    expect(places(parsePlacements("*@q4"), d("any/thing", "auto"))).toBe(false);
    expect(placesByTeam(p)).toBe(false);
  });

  it("places teams: their own workers, and shared ones that leave them out", () => {
    const own = parsePlacements("team:acme");
    expect(places(own, d("org/m", "q4", "acme"))).toBe(true);
    expect(places(own, d("org/m", "q4", "beta"))).toBe(false);
    const shared = parsePlacements("!team:acme");
    expect(places(shared, d("org/m", "q4", "acme"))).toBe(false);
    expect(places(shared, d("org/m", "q4", "beta"))).toBe(true); // only exclusions: the rest is served
    // Any positive entry admits; any ! entry leaves out, whatever admitted it.
    const mixed = parsePlacements("*@q4,team:acme,!big/*");
    expect(places(mixed, d("org/m", "q4", "beta"))).toBe(true);
    expect(places(mixed, d("org/m", "fp32", "beta"))).toBe(false);
    expect(places(mixed, d("org/m", "fp32", "acme"))).toBe(true);
    expect(places(mixed, d("big/m", "q4", "acme"))).toBe(false);
    expect([own, shared, mixed].map(placesByTeam)).toEqual([true, true, true]);
  });

  it("serves every model when unset or empty", () => {
    for (const v of [undefined, "", " , "]) {
      expect(parsePlacements(v)).toEqual([]);
      expect(places(parsePlacements(v), d("org/m", "fp32"))).toBe(true);
    }
  });

  it("refuses an entry without a model, with an unknown dtype or a team without a slug, naming it", () => {
    expect(() => parsePlacements("org/*,@q4")).toThrow(/entry "@q4" names no model/);
    expect(() => parsePlacements("org/m@q5")).toThrow(/entry "org\/m@q5": the dtype after @ must be one of auto, fp32/);
    expect(() => parsePlacements("team:")).toThrow(/entry "team:": team: takes a team's slug/);
    expect(() => parsePlacements("!team:Acme Corp")).toThrow(/entry "!team:Acme Corp"/);
    expect(() => parsePlacements("!")).toThrow(/entry "!" names no model/);
  });

  it("names a model served for one team by the team, and shows it without", () => {
    const key = servedModelKey("org/m|x", "q4");
    expect(teamModelKey(key, "team_1")).toBe("org/m|x#q4|team:team_1");
    expect(withoutTeam(teamModelKey(key, "team_1"))).toBe(key);
    expect(withoutTeam(key)).toBe(key);
  });
});
