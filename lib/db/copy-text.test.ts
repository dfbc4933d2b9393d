import { describe, expect, it } from "vitest";
import { copyTextUnescaper, countNewlines, inlineParams } from "./copy-text";

describe("copyTextUnescaper", () => {
  const escaped = String.raw`{"c": "a \\"q\\" \\\\ b\\n"}` + "\n" + String.raw`x\ty\\` + "\n";
  const plain = String.raw`{"c": "a \"q\" \\ b\n"}` + "\n" + "x\ty\\\n";

  it("decodes every escape, split at every possible chunk boundary", () => {
    const bytes = Buffer.from(escaped);
    for (let cut = 0; cut <= bytes.length; cut++) {
      for (const size of [1, 2, 3, 7, bytes.length]) {
        const decode = copyTextUnescaper();
        const parts = [bytes.subarray(0, cut)];
        for (let i = cut; i < bytes.length; i += size) parts.push(bytes.subarray(i, i + size));
        const out = Buffer.concat(parts.filter((p) => p.length > 0).map(decode)).toString();
        expect(out, `cut ${cut} size ${size}`).toBe(plain);
      }
    }
  });

  it("returns a chunk without backslashes untouched", () => {
    const chunk = Buffer.from("no escapes here\n");
    expect(copyTextUnescaper()(chunk)).toBe(chunk);
  });

  it("counts rows and inlines parameters as safe literals", () => {
    expect(countNewlines(Buffer.from("a\nb\n\n"))).toBe(3);
    expect(inlineParams("select $1, $2, $10", [`it's \\ 'x'`, 5, , , , , , , , null])).toBe(
      String.raw`select E'it''s \\ ''x''', 5, null`,
    );
    expect(() => inlineParams("select $1", [{}])).toThrow();
  });
});
