// Whether `npm start` (and the tests) build the web app first.
import { mkdirSync, mkdtempSync, utimesSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { buildIsStale, buildWith } from "./build";

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
