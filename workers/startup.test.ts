// A worker that shares no secret with the app refuses to start, saying what to set: before, one
// on another machine made a secret of its own and looked live while the app's calls were refused.
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { workerProcessArgs } from "@/scripts/lib/app-process";

describe("a worker's start", () => {
  it("refuses without WORKER_SECRET, AUTH_SECRET or the app's DATA_DIR", () => {
    const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: mkdtempSync(path.join(os.tmpdir(), "lmp-worker-")) };
    delete env.AUTH_SECRET;
    delete env.WORKER_SECRET;
    const r = spawnSync(process.execPath, workerProcessArgs(), { env, encoding: "utf8", timeout: 60_000 });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/\[worker\] failed to start: no secret shared with the app: set WORKER_SECRET/);
  });
});
