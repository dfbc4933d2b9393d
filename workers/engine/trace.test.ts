// ENGINE_TRACE (./trace.ts): one line per pass and per first token, written when the engine
// idles; a decode step's line says what its time went to (pass, exps run, draws).
import { mkdtemp, readFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { expect, it } from "vitest";
import { tinyModelDir } from "./testing/models";

it("traces each pass, and a decode step's pass, exps run and draws within its time", async () => {
  const file = path.join(await mkdtemp(path.join(os.tmpdir(), "lmp-trace-")), "trace.jsonl");
  process.env.ENGINE_TRACE = file; // read when the module is first imported (vitest isolates files)
  const { Engine } = await import("./engine");
  const engine = new Engine({ models: [await tinyModelDir()] });
  const sampled = await engine.generate({ prompt: "The", max_tokens: 6, seed: 3, temperature: 0.8 });
  const greedy = await engine.generate({ prompt: "The", max_tokens: 6, temperature: 0 });
  // Unloading waits for the scheduler to idle, which writes the lines.
  await new Promise<void>((resolve) => engine.retain([], () => resolve()));
  await engine.dispose();
  const lines = (await readFile(file, "utf8"))
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, number | string>);
  expect(lines.filter((l) => l.k === "first")).toHaveLength(2);
  expect(lines.filter((l) => l.k === "prefill").length).toBeGreaterThanOrEqual(2);
  const decodes = lines.filter((l) => l.k === "decode");
  const steps = sampled.usage.completion_tokens - 1 + greedy.usage.completion_tokens - 1;
  expect(decodes).toHaveLength(steps);
  for (const d of decodes) {
    const [ms, pass, exps, draw] = [d.ms, d.passMs, d.expsMs, d.drawMs] as number[];
    expect(pass).toBeGreaterThan(0);
    expect(Math.min(exps, draw)).toBeGreaterThanOrEqual(0);
    expect(pass + exps + draw).toBeLessThanOrEqual(ms + 0.05); // (each rounded to 0.01 ms)
  }
  // The sampled steps ran the exps session; the greedy ones did not.
  const withExps = decodes.filter((d) => (d.expsMs as number) > 0);
  expect(withExps.length).toBeGreaterThanOrEqual(sampled.usage.completion_tokens - 1);
});
