import { describe, expect, it } from "vitest";
import { ID_PREFIXES, newId, randomToken } from "./ids";

describe("ids", () => {
  it("have the kind's prefix and 20 base36 characters", () => {
    for (const kind of Object.keys(ID_PREFIXES) as (keyof typeof ID_PREFIXES)[]) {
      expect(newId(kind)).toMatch(new RegExp(`^${ID_PREFIXES[kind]}_[0-9a-z]{20}$`));
    }
  });

  it("never repeat, also across refills of the random pool", () => {
    // 20,000 ids draw about 400 KB of randomness: the 4 KiB pool is refilled ~100 times.
    const ids = new Set(Array.from({ length: 20_000 }, () => newId("sample")));
    expect(ids.size).toBe(20_000);
  });

  it("use every base36 character about equally often", () => {
    const counts = new Map<string, number>();
    const text = randomToken(360_000);
    expect(text).toHaveLength(360_000);
    for (const c of text) counts.set(c, (counts.get(c) ?? 0) + 1);
    expect(counts.size).toBe(36);
    // 10,000 expected per character; a modulo bias (no rejection) would put 0-3 near 10,500.
    for (const n of counts.values()) expect(Math.abs(n - 10_000)).toBeLessThan(450);
  });
});
