import { describe, expect, it } from "vitest";
import { createPrng } from "./prng";

const draws = (seed: number, stream = 0) => {
  const p = createPrng(seed, stream);
  return Array.from({ length: 8 }, () => p.next());
};

describe("createPrng", () => {
  it("reproduces a seed's draws, in [0, 1), one stream per choice", () => {
    expect(draws(42)).toEqual(draws(42));
    expect(draws(42, 1)).not.toEqual(draws(42, 0));
    for (const x of draws(7)) expect(x >= 0 && x < 1).toBe(true);
  });

  it("uses every bit of a seed up to 2^53, not only the low 32", () => {
    for (const low of [0, 1, 12345]) {
      expect(draws(2 ** 32 + low)).not.toEqual(draws(low));
      expect(draws(2 ** 40 + low)).not.toEqual(draws(2 ** 41 + low));
    }
    expect(draws(Number.MAX_SAFE_INTEGER)).toEqual(draws(Number.MAX_SAFE_INTEGER));
  });
});
