import { describe, expect, it } from "vitest";
import { inlineParams } from "./copy-statement";

describe("inlineParams", () => {
  it("inlines parameters as safe literals", () => {
    expect(inlineParams("select $1, $2, $10", [`it's \\ 'x'`, 5, , , , , , , , null])).toBe(
      String.raw`select E'it''s \\ ''x''', 5, null`,
    );
    expect(() => inlineParams("select $1", [{}])).toThrow();
  });
});
