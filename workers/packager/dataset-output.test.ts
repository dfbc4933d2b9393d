// A JSONL line leaves as Postgres wrote it, except for the characters line readers split on.
import { mkdtempSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { LocalBlobStore } from "@/lib/blob";
import type { DatasetOptions } from "@/lib/contracts/dataset-options";
import { DatasetOutput } from "./dataset-output";

async function write(lines: string[]) {
  const root = mkdtempSync(path.join(os.tmpdir(), "lmp-output-"));
  const out = new DatasetOutput(
    new LocalBlobStore(root),
    { key: "d/file.jsonl", name: "file", split: null },
    { format: "jsonl", compression: "none", dedupe: false } satisfies DatasetOptions,
    new AbortController().signal,
    root,
  );
  // As rows arrive: several lines in one buffer, each at its bounds.
  const data = Buffer.from(lines.join(""));
  let at = 0;
  for (const line of lines) {
    const length = Buffer.byteLength(line);
    await out.add(data, at, at + length);
    at += length;
  }
  const file = await out.finish();
  return { file, text: readFileSync(path.join(root, "d/file.jsonl"), "utf8") };
}

describe("JSONL output", () => {
  it("escapes U+2028, U+2029 and U+0085 inside strings, so every line reader sees one line per sample", async () => {
    const odd = JSON.stringify({ messages: [{ role: "user", content: "a\u2028b\u2029c\u0085d ’ —" }] });
    const plain = JSON.stringify({ messages: [{ role: "user", content: "plain ’ — é" }] });
    const { file, text } = await write([plain, odd, plain]);
    expect(file.samples).toBe(3);
    expect(text).not.toMatch(/[\u2028\u2029\u0085]/);
    expect(text.split("\n")).toHaveLength(4); // three lines and the last newline
    // Python's str.splitlines() splits at these characters: here, only at the newlines.
    expect(text.split(/\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]/)).toHaveLength(4);
    const read: unknown[] = [];
    for await (const line of createInterface({ input: Readable.from([text]) })) read.push(JSON.parse(line));
    expect(read).toEqual([JSON.parse(plain), JSON.parse(odd), JSON.parse(plain)]); // the same content
    expect(text.split("\n")[0]).toBe(plain); // other lines untouched, byte for byte
  });
});
