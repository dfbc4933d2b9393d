import { describe, expect, inject, it } from "vitest";
import { servedModelKey } from "@/lib/contracts/models";
import { workers } from "@/lib/db/schema";
import { workerSecret } from "@/lib/internal-secret";
import { InferenceClient } from "@/lib/inference/client";
import { db } from "../helpers/context";

describe("the worker process", () => {
  it("registers with a heartbeat and advertises its inference address and models", async () => {
    const [row] = await db().db.select().from(workers);
    expect(row).toBeDefined();
    expect(row!.address).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(row!.models).toContain(servedModelKey(inject("tinyModel"), "auto"));
    expect(row!.modelStates[servedModelKey(inject("tinyModel"), "auto")]).toMatchObject({ state: "ready" });
    const before = row!.heartbeatAt.getTime();
    await expect
      .poll(async () => (await db().db.select().from(workers))[0]!.heartbeatAt.getTime(), { timeout: 5_000 })
      .toBeGreaterThan(before);
  });

  it("generates through its internal API with the shared secret, and refuses without it", async () => {
    const [row] = await db().db.select().from(workers);
    const client = new InferenceClient({ url: row!.address!, secret: workerSecret() });
    const result = await client.generate({
      model: inject("tinyModel"),
      prompt: "Hello",
      max_tokens: 5,
      temperature: 0,
    });
    expect(result.choices).toHaveLength(1);
    expect(result.usage.completion_tokens).toBeGreaterThan(0);
    const denied = await fetch(`${row!.address}/generate`, { method: "POST", body: "{}" });
    expect(denied.status).toBe(401);
  });
});
