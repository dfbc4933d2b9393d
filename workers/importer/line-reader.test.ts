import { describe, expect, it } from "vitest";
import { readLines, type Line } from "./line-reader";
import { importedSampleId } from "./parse-line";

async function* chunks(text: string, size: number): AsyncGenerator<Uint8Array> {
  const bytes = Buffer.from(text);
  for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size);
}

const read = async (text: string, size: number, start = 0, firstLine = 1, maxBytes = 10) => {
  const out: Line[] = [];
  for await (const l of readLines(chunks(text, size), { start, firstLine, maxBytes })) out.push(l);
  return out.map((l) => [l.number, l.end, l.tooLong ? "TOO LONG" : l.bytes.toString()]);
};

describe("import lines", () => {
  it("splits lines wherever the chunks are cut, with each line's end offset", async () => {
    const text = "ab\n\ncdé\nlast";
    const expected = [
      [1, 3, "ab"],
      [2, 4, ""],
      [3, 9, "cdé"],
      [4, 13, "last"],
    ];
    for (const size of [1, 2, 3, 5, 100]) expect(await read(text, size), `chunks of ${size}`).toEqual(expected);
  });

  it("reports a line over the limit without keeping it, and goes on after it", async () => {
    const text = `short\n${"x".repeat(25)}\nok\n${"y".repeat(11)}`;
    for (const size of [1, 4, 7, 1000]) {
      expect(await read(text, size)).toEqual([
        [1, 6, "short"],
        [2, 32, "TOO LONG"],
        [3, 35, "ok"],
        [4, 46, "TOO LONG"],
      ]);
    }
  });

  it("resumes from an offset with the right line numbers", async () => {
    // What a worker taking over reads: the rest of the file from bytes_read, numbered from lines_read + 1.
    expect(await read("c\nd\n", 2, 100, 41)).toEqual([
      [41, 102, "c"],
      [42, 104, "d"],
    ]);
  });

  it("derives one sample id per import line, the same every time", () => {
    const a = importedSampleId("imp_a", 1);
    expect(a).toMatch(/^smp_[0-9a-z]{20}$/);
    expect(importedSampleId("imp_a", 1)).toBe(a);
    expect(new Set([a, importedSampleId("imp_a", 2), importedSampleId("imp_b", 1)]).size).toBe(3);
  });
});
