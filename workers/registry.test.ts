// A worker's row in the registry: kept fresh by its heartbeat, and written again if removed.
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { workers } from "@/lib/db/schema";
import { startFeedWorld } from "@/lib/db/throwaway";
import { registerWorker } from "./registry";

let world: Awaited<ReturnType<typeof startFeedWorld>>;
beforeAll(async () => {
  world = await startFeedWorld("registry");
}, 60_000);
afterAll(() => world?.close());

describe("the worker registry", () => {
  it("writes a removed row again at the next heartbeat, with what the worker advertised", async () => {
    const { db } = world.app;
    const reg = await registerWorker(db, { heartbeatSeconds: 0.05 });
    await reg.advertise({ address: "http://10.0.0.7:4100", models: ["org/m#q4"] });
    const row = async () => (await db.select().from(workers).where(eq(workers.id, reg.id)))[0];
    expect(await row()).toMatchObject({ address: "http://10.0.0.7:4100", models: ["org/m#q4"] });
    // Maintenance swept it (silent for an hour: a paused VM), or a backup without it was restored.
    await db.delete(workers).where(eq(workers.id, reg.id));
    // Before: the heartbeats updated nothing, and the app never saw this worker again.
    await expect.poll(row, { timeout: 5_000 }).toMatchObject({ address: "http://10.0.0.7:4100", models: ["org/m#q4"] });
    await reg.stop();
    expect(await row()).toBeUndefined();
    // A load's progress published after the stop writes nothing back (before: the row returned,
    // and the app sent requests to a worker going away).
    await reg.advertise({ modelStates: {} });
    await new Promise((r) => setTimeout(r, 200)); // a few heartbeats' time
    expect(await row()).toBeUndefined();
  });
});
