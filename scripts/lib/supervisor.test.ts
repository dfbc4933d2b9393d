import { afterEach, describe, expect, it } from "vitest";
import { Supervisor } from "./supervisor";

const crashing = ["-e", "process.exit(3)"];
let supervisor: Supervisor | undefined;
afterEach(async () => {
  await supervisor?.stop(1_000);
});

describe("Supervisor", () => {
  it("keeps starting a child that keeps failing when onGiveUp says so", async () => {
    const gaveUp: string[] = [];
    supervisor = new Supervisor({
      maxQuickFailures: 0,
      onGiveUp: (name) => (gaveUp.push(name), true),
      log: () => {},
    });
    const child = supervisor.start("worker", crashing, process.env);
    await expect.poll(() => child.restarts, { timeout: 10_000 }).toBeGreaterThanOrEqual(2);
    expect(gaveUp.length).toBeGreaterThanOrEqual(2);
  });

  it("leaves it stopped otherwise", async () => {
    const gaveUp: string[] = [];
    supervisor = new Supervisor({
      maxQuickFailures: 0,
      onGiveUp: (name) => (gaveUp.push(name), false),
      log: () => {},
    });
    const child = supervisor.start("app", crashing, process.env);
    await expect.poll(() => gaveUp, { timeout: 5_000 }).toEqual(["app"]);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(child.restarts).toBe(0);
  });
});
