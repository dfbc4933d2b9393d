// Whether `npm start` (and the tests) build the web app first.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, utimesSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { buildIsStale, buildWith, waitForBuildLock } from "./build";

function project() {
  const root = mkdtempSync(path.join(os.tmpdir(), "lmp-build-"));
  mkdirSync(path.join(root, "lib"));
  writeFileSync(path.join(root, "lib/a.ts"), "export const a = 1;\n");
  writeFileSync(path.join(root, "package-lock.json"), "{}");
  // What `next build` leaves: BUILD_ID is written midway, long before it is done.
  const nextBuild = (finishes: boolean) => () => {
    mkdirSync(path.join(root, ".next"), { recursive: true });
    writeFileSync(path.join(root, ".next/BUILD_ID"), "x");
    return finishes;
  };
  return { root, nextBuild };
}

describe("the build check", () => {
  it("takes a build stopped after Next wrote BUILD_ID for unfinished (before: built, and the app never started)", () => {
    const { root, nextBuild } = project();
    expect(buildIsStale(root)).toBe(true);
    buildWith(nextBuild(false), root); // Ctrl-C during "Generating static pages"
    expect(buildIsStale(root)).toBe(true);
    buildWith(nextBuild(true), root);
    expect(buildIsStale(root)).toBe(false);
  });

  it("rebuilds after an edit, and after files older than the build replace the sources (an upgrade from an archive)", () => {
    const { root, nextBuild } = project();
    buildWith(nextBuild(true), root);
    expect(buildIsStale(root)).toBe(false);
    writeFileSync(path.join(root, "lib/a.ts"), "export const a = 2;\n");
    expect(buildIsStale(root)).toBe(true);
    buildWith(nextBuild(true), root);
    expect(buildIsStale(root)).toBe(false);
    const old = new Date("2020-01-01T00:00:00Z");
    writeFileSync(path.join(root, "lib/b.ts"), "export const b = 1;\n");
    utimesSync(path.join(root, "lib/b.ts"), old, old);
    utimesSync(path.join(root, "lib"), old, old);
    expect(buildIsStale(root)).toBe(true);
  });
});

describe("the build lock", () => {
  it("waits while another process builds, and takes over a lock whose process is gone", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "lmp-build-lock-"));
    const file = path.join(dir, ".next-build.lock");
    const released = path.join(dir, "released");
    // Another launcher holds it for 600 ms, then releases it.
    const holder = spawn(process.execPath, [
      "-e",
      `const fs = require("fs"); fs.writeFileSync(${JSON.stringify(file)}, JSON.stringify({ pid: process.pid, host: require("os").hostname() })); setTimeout(() => { fs.writeFileSync(${JSON.stringify(released)}, ""); fs.rmSync(${JSON.stringify(file)}); }, 600);`,
    ]);
    await expect.poll(() => existsSync(file), { interval: 10 }).toBe(true);
    // Before: a second build into the same .next at once.
    const release = waitForBuildLock(file, 20);
    expect(existsSync(released)).toBe(true); // taken only once the other had let go
    expect(existsSync(file)).toBe(true); // ours now
    release();
    expect(existsSync(file)).toBe(false);
    await new Promise((r) => holder.once("exit", r));

    const gone = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"]).stdout.toString();
    writeFileSync(file, JSON.stringify({ pid: Number(gone), host: os.hostname() }));
    waitForBuildLock(file, 20)(); // taken over: its process is gone
    expect(existsSync(file)).toBe(false);
  });
});
