// The stop drain, in child processes that receive a real SIGTERM.
import { spawnSync } from "node:child_process";
import path from "node:path";
import { describe, expect, it } from "vitest";

function run(mode: "next" | "alone" | "hung") {
  const script = path.join(import.meta.dirname, "testing/stop-drain-child.ts");
  const started = performance.now();
  const child = spawnSync(process.execPath, ["--import", "tsx", script], {
    encoding: "utf8",
    env: { ...process.env, MODE: mode, USAGE_FLUSH_MS: "600000", STOP_DRAIN_MS: "1500", LOG_FORMAT: "json" },
    timeout: 30_000,
  });
  return { status: child.status, out: child.stdout + child.stderr, ms: performance.now() - started };
}

describe("a stop waits for the writes held in memory", () => {
  it("under a handler that exits on the signal (Next.js'), its exit waits for every drainer", () => {
    const r = run("next");
    expect(r.status, r.out).toBe(0);
    expect(r.out).toContain("usage written");
    expect(r.out).toContain("slow drained");
    expect(r.out).toContain("pending writes finished before stopping");
  });

  it("alone on the signal, it drains and then exits as the signal would have", () => {
    const r = run("alone");
    expect(r.status, r.out).toBe(143);
    expect(r.out).toContain("usage written");
    expect(r.out).toContain("slow drained");
  });

  it("a drainer that never ends holds the stop for STOP_DRAIN_MS only, and says so", () => {
    const r = run("hung");
    expect(r.status, r.out).toBe(143);
    expect(r.out).toContain("usage written");
    expect(r.out).toContain("stopping with writes unfinished");
    expect(r.ms).toBeLessThan(20_000);
  });
});
