// The demo deployment follows its model when DATA_DIR moves.
import { mkdirSync, mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deployments } from "../db/schema";
import { startFeedWorld } from "../db/throwaway";
import { repointDemoModel, seedDemo } from "./demo";

let world: Awaited<ReturnType<typeof startFeedWorld>>;
beforeAll(async () => {
  world = await startFeedWorld("demo");
}, 60_000);
afterAll(() => world?.close());

describe("repointDemoModel", () => {
  it("points the demo deployment at the new DATA_DIR's tiny model once the old folder is gone", async () => {
    const { db } = world.app;
    const before = path.join(mkdtempSync(path.join(os.tmpdir(), "lmp-old-")), "models", "tiny"); // never made: moved away
    expect(await seedDemo(db, { demoModel: before })).not.toBeNull();
    const now = path.join(mkdtempSync(path.join(os.tmpdir(), "lmp-new-")), "models", "tiny");
    mkdirSync(now, { recursive: true });
    const model = async () => (await db.select().from(deployments).where(eq(deployments.name, "demo")))[0]!.model;
    expect(await repointDemoModel(db, now)).toBe(true);
    expect(await model()).toBe(now); // before: the old path, and the deployment failed for good
    expect(await repointDemoModel(db, now)).toBe(false);
    // One whose folder is still there, or that an operator pointed elsewhere, is left alone.
    const other = path.join(mkdtempSync(path.join(os.tmpdir(), "lmp-other-")), "models", "tiny");
    expect(await repointDemoModel(db, other)).toBe(false); // `now` exists
    expect(await model()).toBe(now);
    await db.update(deployments).set({ model: "org/some-model" }).where(eq(deployments.name, "demo"));
    expect(await repointDemoModel(db, other)).toBe(false);
  });
});
