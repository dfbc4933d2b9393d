import { describe, expect, it } from "vitest";
import type { GenerationStreamEvent } from "../contracts/generation";
import type { CompletionOutcome } from "./completion-events";
import { metered } from "./deployment-completions";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** An echo's delta at once, the first generated token `waitMs` later, then the end. */
async function* echoed(prompt: string, waitMs: number): AsyncIterable<GenerationStreamEvent> {
  yield { type: "delta", index: 0, text: prompt };
  await sleep(waitMs);
  yield { type: "delta", index: 0, text: " token" };
  yield { type: "finish", index: 0, finish_reason: "length", stop: null };
  yield { type: "done", usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } };
}

async function outcomeOf(events: AsyncIterable<GenerationStreamEvent>, after: number): Promise<CompletionOutcome> {
  let outcome: CompletionOutcome | undefined;
  const startedAt = performance.now();
  for await (const e of metered(events, { startedAt, after }, undefined, (o) => (outcome = o))) void e;
  return outcome!;
}

describe("the time to first token of a completion", () => {
  it("with echo, is the time to the first generated text, not to the echoed prompt", async () => {
    const withEcho = await outcomeOf(echoed("The dog", 80), "The dog".length);
    expect(withEcho).toMatchObject({ status: "ok", promptTokens: 3, completionTokens: 1 });
    expect(withEcho.ttftMs).toBeGreaterThanOrEqual(75);
    // Without echo, the first text is the first token.
    const plain = await outcomeOf(echoed("The dog", 80), 0);
    expect(plain.ttftMs).toBeLessThan(75);
  });
});
