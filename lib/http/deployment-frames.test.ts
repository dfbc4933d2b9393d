import { describe, expect, it } from "vitest";
import type { GenerationStreamEvent } from "../contracts/generation";
import { DeploymentStreamChunk } from "../contracts/deployments";
import { batchedEvents } from "../inference/batches";
import { InferenceError } from "../inference/client";
import { completionStreamFrames, updateStreamFrames } from "./deployment-frames";

const usage = { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 };
const groups: GenerationStreamEvent[][] = [
  [{ type: "delta", index: 0, text: "Hello" }],
  [
    { type: "delta", index: 0, text: ", world" },
    { type: "finish", index: 0, finish_reason: "length", stop: null },
    { type: "done", usage },
  ],
];

async function* from<T>(items: T[]): AsyncIterable<T> {
  for (const i of items) yield i;
}
async function collect(frames: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const f of frames) out.push(f);
  return out;
}
/** The `data:` payloads of a stream's text, in order. */
const payloads = (text: string) =>
  text
    .split("\n\n")
    .filter(Boolean)
    .map((e) =>
      e
        .split("\n")
        .find((l) => l.startsWith("data: "))!
        .slice(6),
    );

describe("deployment stream frames", () => {
  it("POST: one write per group of events, the spec's chunks in order, [DONE] with the usage", async () => {
    const writes = await collect(completionStreamFrames(batchedEvents(from(groups)), "req_1"));
    expect(writes).toHaveLength(2);
    expect(payloads(writes[0]!)).toEqual(['{"index":0,"completion":"Hello"}']);
    const last = payloads(writes[1]!);
    expect(last.at(-1)).toBe("[DONE]");
    expect(last.slice(0, -1).map((d) => DeploymentStreamChunk.parse(JSON.parse(d)))).toEqual([
      { index: 0, completion: ", world" },
      { index: 0, completion: "", finish_reason: "length", stop: null },
      { usage },
    ]);
  });

  it("POST: events without groups give the same text, one write per event", async () => {
    const grouped = (await collect(completionStreamFrames(batchedEvents(from(groups)), "r"))).join("");
    const single = await collect(completionStreamFrames(from(groups.flat()), "r"));
    expect(single).toHaveLength(4);
    expect(single.join("")).toBe(grouped);
  });

  it("POST: a failure mid-stream is an error event and no [DONE]", async () => {
    async function* failing(): AsyncIterable<GenerationStreamEvent[]> {
      yield groups[0]!;
      throw new InferenceError(502, "internal", "the vLLM upstream broke off the stream: reset");
    }
    const data = payloads((await collect(completionStreamFrames(batchedEvents(failing()), "r"))).join(""));
    expect(data).toHaveLength(2);
    expect(JSON.parse(data[1]!)).toMatchObject({ error: { message: expect.stringContaining("broke off") } });
  });

  it("GET: the updates of one group in one write, the end with the group that finished", async () => {
    const writes = await collect(updateStreamFrames(batchedEvents(from(groups)), "r"));
    expect(writes).toHaveLength(2);
    expect(writes[0]).toBe('event: update\ndata: {"completion":"Hello"}\n\n');
    expect(writes[1]).toBe(
      'event: update\ndata: {"completion":", world"}\n\n' +
        `event: end\ndata: ${JSON.stringify({ finish_reason: "length", stop: null, usage })}\n\n`,
    );
  });
});
