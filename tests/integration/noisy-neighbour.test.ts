import { describe, expect, it } from "vitest";
import { setTeamLimits } from "@/lib/services/teams";
import { db } from "../helpers/context";
import { busySequences, makeTeamWithDeployment, noEosBias } from "../helpers/deployments";

/**
 * One team floods its deployment with n=16 requests (more than the worker's batch holds); another
 * team's short completion must still start within a step or two, not after the flood: the
 * worker's scheduler shares its batch between teams.
 */
async function firstTokenMs(url: string, key: string): Promise<number> {
  const t0 = performance.now();
  const res = await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ prompt: "Hello there", max_tokens: 4, temperature: 0, stream: true }),
  });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  let text = "";
  while (!/"completion":"[^"]/.test(text)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`stream ended without a token: ${text}`);
    text += new TextDecoder().decode(value);
  }
  const ms = performance.now() - t0;
  await reader.cancel();
  return ms;
}

describe("noisy neighbour", () => {
  it("keeps another team's time to first token short while one team floods its deployment", async () => {
    const a = await makeTeamWithDeployment();
    const b = await makeTeamWithDeployment();
    await setTeamLimits(db().db, { teamId: a.team.id, limits: { concurrentStreams: 100 } });
    const noEos = await noEosBias();
    const idle: number[] = [];
    for (let i = 0; i < 3; i++) idle.push(await firstTokenMs(b.dep.url, b.team.modelKey));

    // Twelve requests of 16 sequences and 400 tokens each: many seconds of work queued at once.
    const controller = new AbortController();
    const flood = Array.from({ length: 12 }, (_, i) =>
      fetch(a.dep.url, {
        method: "POST",
        signal: controller.signal,
        headers: { authorization: `Bearer ${a.team.modelKey}`, "content-type": "application/json" },
        body: JSON.stringify({ prompt: `Flood ${i}`, max_tokens: 400, n: 16, seed: i, logit_bias: noEos }),
      }).catch(() => null),
    );
    try {
      await new Promise((r) => setTimeout(r, 500)); // the flood fills the batch and the queue
      expect(await busySequences()).toBeGreaterThan(16); // the batch is full and requests wait
      const flooded: number[] = [];
      for (let i = 0; i < 4; i++) flooded.push(await firstTokenMs(b.dep.url, b.team.modelKey));
      flooded.sort((x, y) => x - y);
      // First come, first served would put these behind the whole flood (tens of seconds).
      expect(flooded.at(-1)!, `idle ${idle.map(Math.round)} ms, flooded ${flooded.map(Math.round)} ms`).toBeLessThan(
        1_500,
      );
    } finally {
      controller.abort();
      await Promise.all(flood);
    }
  }, 120_000);
});
