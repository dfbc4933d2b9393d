import { describe, expect, it } from "vitest";
import { parseLine } from "./parse-line";

const line = (text: string) =>
  ({ bytes: Buffer.from(text, "utf8"), tooLong: false }) as Parameters<typeof parseLine>[0];
const storable = (s: string) => !/\u0000|\p{Surrogate}/u.test(s);

describe("an import line's refusal", () => {
  it("is storable and short whatever the line held (NUL, half a surrogate pair, a huge unknown key)", () => {
    const cases = [
      "\u0000\u0000\u0000\u0000",
      '{"messages":[\ud83d]}',
      '{"messages":[{"role":"user","content":"a"}],"\\u0000x":1}',
      '{"messages":[{"role":"user","content":"a"}],"\\ud800":1}',
      `{"messages":[{"role":"user","content":"a"}],"${"k".repeat(500_000)}":1}`,
    ];
    for (const text of cases) {
      const parsed = parseLine(line(text), 1 << 20);
      expect(parsed.kind, text.slice(0, 40)).toBe("refused");
      if (parsed.kind !== "refused") continue;
      expect(storable(parsed.error.message)).toBe(true);
      expect(parsed.error.message.length).toBeLessThanOrEqual(301);
      if (parsed.error.param !== undefined) {
        expect(storable(parsed.error.param)).toBe(true);
        expect(parsed.error.param.length).toBeLessThanOrEqual(301);
      }
      // What jsonb would take: the report's JSON round-trips through Postgres' rules.
      expect(JSON.stringify(parsed.error)).not.toMatch(/\\u0000|\\ud[89ab]/i);
    }
  });

  it("keeps a short refusal as it was", () => {
    const parsed = parseLine(line('{"messages":[{"role":"robot","content":"x"}]}'), 1 << 20);
    expect(parsed).toMatchObject({ kind: "refused", error: { type: "invalid_request", param: "messages[0].role" } });
  });
});
