import { describe, expect, it } from "vitest";
import { SelectionBody } from "../contracts/pipelines";
import { DEFAULT_PAGE_SIZE, filterOf, parseSelectionParams, selectionToSearch } from "./selection-params";

describe("selection in the URL", () => {
  it("round-trips every filter, the page and the open sample", () => {
    const state = {
      userId: "u 1",
      groupId: "g/2",
      metadata: { lang: "en", "a=b.c": "x&y" },
      limit: 100,
      offset: 200,
      sample: "smp_abc123",
    };
    const search = selectionToSearch(state);
    expect(parseSelectionParams(new URLSearchParams(search))).toEqual(state);
    expect(search).toContain("meta.lang=en");
  });

  it("round-trips the generation filter as gen.* parameters, into the API's body; drops what the API refuses", () => {
    const state = {
      metadata: {},
      generation: { captured: true, finishReason: "stop" as const, keyId: "key_abc", deployment: "acme/chat" },
      limit: DEFAULT_PAGE_SIZE,
      offset: 0,
    };
    const search = selectionToSearch(state);
    expect(search).toContain("gen.finishReason=stop");
    expect(parseSelectionParams(new URLSearchParams(search))).toEqual(state);
    const body = filterOf(parseSelectionParams(new URLSearchParams(search)));
    expect(SelectionBody.parse(body).generation).toEqual(state.generation);
    const bad = parseSelectionParams(new URLSearchParams("gen.finishReason=maybe&gen.captured=yes&gen.other=1"));
    expect(bad.generation).toBeUndefined();
    expect(filterOf(parseSelectionParams(new URLSearchParams("gen.captured=false")))).toEqual({
      generation: { captured: false },
    });
  });

  it("round-trips an import's samples (importId), into the API's body", () => {
    const state = { metadata: {}, importId: "imp_abc123", limit: DEFAULT_PAGE_SIZE, offset: 0 };
    const search = selectionToSearch(state);
    expect(search).toBe("importId=imp_abc123");
    expect(parseSelectionParams(new URLSearchParams(search))).toEqual(state);
    expect(SelectionBody.parse(filterOf(state)).importId).toBe("imp_abc123");
    expect(parseSelectionParams(new URLSearchParams("importId=")).importId).toBeUndefined();
  });

  it("round-trips metadata operators, dates, search and a random sample", () => {
    const state = {
      metadata: {
        lang: { $ne: "en" },
        "src.x": { $in: ["a", "b,c"] },
        tier: { $exists: false },
        code: { $prefix: "ab" },
        plain: "v",
      },
      createdAfter: "2026-01-01T00:00:00.000Z",
      createdBefore: "2026-02-01T00:00:00+02:00",
      search: "refund & return",
      sampleSize: 100,
      sampleSeed: 7,
      limit: DEFAULT_PAGE_SIZE,
      offset: 0,
    };
    const search = selectionToSearch(state);
    expect(parseSelectionParams(new URLSearchParams(search))).toEqual(state);
    expect(search).toContain("exists.tier=false");
    expect(filterOf(state)).toMatchObject({ sample: { size: 100, seed: 7 }, search: "refund & return" });
    expect(SelectionBody.parse(filterOf(state))).toEqual(filterOf(state));
    // Values the API refuses are dropped.
    const bad = parseSelectionParams(new URLSearchParams("exists.a=maybe&createdAfter=soon&sampleSize=0&prefix.b="));
    expect(bad).toEqual({ metadata: {}, limit: DEFAULT_PAGE_SIZE, offset: 0 });
  });

  it("leaves defaults out of the URL", () => {
    expect(selectionToSearch({ metadata: {}, limit: DEFAULT_PAGE_SIZE, offset: 0 })).toBe("");
  });

  it("reads Next's searchParams objects, repeated keys included", () => {
    const s = parseSelectionParams({ userId: "u1", "meta.lang": "en", "meta.tier": ["pro", "free"] });
    expect(s.metadata).toEqual({ lang: "en", tier: "free" });
    expect(s.userId).toBe("u1");
  });

  it("drops values the API would reject instead of failing", () => {
    const s = parseSelectionParams(
      new URLSearchParams({
        userId: "",
        limit: "7",
        offset: "-3",
        sample: "../x",
        "meta.": "v",
        groupId: "x".repeat(300),
      }),
    );
    expect(s).toEqual({ metadata: {}, limit: DEFAULT_PAGE_SIZE, offset: 0 });
  });

  it("turns the state into a body the API's own schema accepts", () => {
    const s = parseSelectionParams(new URLSearchParams("userId=u1&meta.lang=en&limit=25&offset=25"));
    const body = filterOf(s);
    expect(body).toEqual({ userId: "u1", metadata: { lang: "en" } });
    expect(SelectionBody.parse(body)).toEqual(body);
    expect(filterOf(parseSelectionParams(new URLSearchParams()))).toEqual({});
  });
});
