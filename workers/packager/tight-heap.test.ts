import { afterEach, describe, expect, it } from "vitest";
import type { DatasetOptions } from "@/lib/contracts/dataset-options";
import type { CopyRowBatch } from "@/lib/db/copy-binary";
import type { DatasetOutput } from "./dataset-output";
import { LARGE_PARSED_SAMPLE_BYTES, packageRows } from "./package-rows";
import { holdTightHeap, tightHeapHolds } from "./tight-heap";
import { tinyModelDir } from "../engine/testing/models";

/**
 * The old space's peak while objects are promoted and dropped (a rolling window of 300k objects
 * that outlive the young generation) beside `live`, in MB.
 */
function churnPeakMb(): number {
  const window: unknown[] = new Array(300_000);
  let peak = 0;
  for (let i = 0; i < 4_000_000; i++) {
    window[i % window.length] = { i, text: `sample ${i}` };
    if (i % 10_000 === 0) peak = Math.max(peak, process.memoryUsage().heapUsed);
  }
  return peak / 1e6;
}

let releases: (() => void)[] = [];
afterEach(() => {
  for (const release of releases) release();
  releases = [];
});

describe("holdTightHeap", () => {
  it("keeps the old space near what survives while held, and gives V8 its own growth back after", () => {
    const live = Array.from({ length: 400_000 }, (_, i) => ({ i, text: `live ${i}` }));
    const before = churnPeakMb();
    const release = holdTightHeap();
    releases.push(release);
    const held = churnPeakMb();
    release();
    churnPeakMb(); // V8's next full collections set its own limit again
    const after = churnPeakMb();
    expect(live.length).toBe(400_000);
    // V8 alone let this heap grow to about 2.5 times what it holds while held (134 against 66 MB
    // in a standalone process).
    expect(held).toBeLessThan(before * 0.75);
    expect(after).toBeGreaterThan(held / 0.75);
  });

  it("is held until every hold is released, and a release counts once", () => {
    const a = holdTightHeap();
    const b = holdTightHeap();
    releases.push(a, b);
    expect(tightHeapHolds()).toBe(2);
    a();
    a();
    expect(tightHeapHolds()).toBe(1);
    b();
    expect(tightHeapHolds()).toBe(0);
  });
});

describe("packageRows and the tight heap", () => {
  /** One batch per line; `holds` records the holds taken while each line after the first is read. */
  async function packaged(
    lines: string[],
    options: DatasetOptions,
    tokenizerModel?: string,
  ): Promise<{ holds: number[]; kept: number }> {
    const holds: number[] = [];
    async function* rows(): AsyncGenerator<CopyRowBatch> {
      for (const line of lines) {
        const data = Buffer.from(line);
        yield { buffers: [data], bounds: [0, data.length], count: 1 };
        holds.push(tightHeapHolds());
      }
    }
    let kept = 0;
    const output = { add: () => void kept++ } as unknown as DatasetOutput;
    const job = { options, size: lines.length, tokenizerModel: tokenizerModel ?? null };
    await packageRows(job, rows, new Map([[null, output]]), new AbortController().signal);
    return { holds, kept };
  }
  /** A line as Postgres renders it: the plain reader reads it off its bytes, without JSON.parse. */
  const plainLine = (content: string) =>
    `{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "${content}"}]}`;
  /** With a `name`, a conversation the plain reader leaves to JSON.parse. */
  const namedLine = (content: string) =>
    `{"messages": [{"role": "user", "content": "hi"}, {"name": "bot", "role": "assistant", "content": "${content}"}]}`;
  const options = { format: "jsonl", compression: "none", dedupe: false, validate: "openai-chat" } as DatasetOptions;

  it("holds it from the first large sample parsed in JavaScript to the end of the job", async () => {
    const large = namedLine("x".repeat(LARGE_PARSED_SAMPLE_BYTES));
    const { holds, kept } = await packaged([namedLine("a"), large, namedLine("b")], options);
    expect(kept).toBe(3);
    expect(holds).toEqual([0, 1, 1]);
    expect(tightHeapHolds()).toBe(0);
  });

  it("does not hold it for small samples, nor for a large one read off its bytes", async () => {
    const large = plainLine("x".repeat(LARGE_PARSED_SAMPLE_BYTES));
    const { holds, kept } = await packaged([namedLine("a"), large, plainLine("b")], options);
    expect(kept).toBe(3);
    expect(holds).toEqual([0, 0, 0]);
  });

  it("releases it when the job fails", async () => {
    const large = namedLine("x".repeat(LARGE_PARSED_SAMPLE_BYTES));
    await expect(packaged([large, "{not json"], options)).rejects.toThrow();
    expect(tightHeapHolds()).toBe(0);
  });

  it("holds it while a job counts tokens", async () => {
    const counting = { ...options, validate: undefined, tokenizer: "counter" } as DatasetOptions;
    const { holds, kept } = await packaged([plainLine("a"), plainLine("b")], counting, await tinyModelDir());
    expect(kept).toBe(2);
    expect(holds).toEqual([1, 1]);
    expect(tightHeapHolds()).toBe(0);
    // A tokenizer that cannot be loaded fails the job, and the hold goes with it.
    await expect(packaged([plainLine("a")], counting, "/nonexistent/model")).rejects.toThrow(/tokenizer/);
    expect(tightHeapHolds()).toBe(0);
  });
});
