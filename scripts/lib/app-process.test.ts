import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "./build";
import { WORKER_NODE_FLAGS, workerProcessArgs } from "./app-process";

describe("the worker's process flags", () => {
  it("are the same for `npm run worker` as for `npm start`, the tests and the benches", () => {
    // package.json cannot call workerProcessArgs(): its script repeats the flags, and must not drift.
    const pkg = JSON.parse(readFileSync(path.join(repoRoot, "package.json"), "utf8"));
    expect(pkg.scripts.worker).toBe(`node ${WORKER_NODE_FLAGS.join(" ")} workers/main.ts`);
  });

  it("put a caller's node flags first and the worker's entry point last", () => {
    const args = workerProcessArgs(["--cpu-prof"]);
    expect(args[0]).toBe("--cpu-prof");
    expect(args).toContain("tsx/esm");
    expect(args.at(-1)).toBe(path.join(repoRoot, "workers/main.ts"));
  });
});
