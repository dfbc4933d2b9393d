// The hub cache given back: what no deployment has named for a while, and snapshots no revision
// points to any more.
import { existsSync, mkdirSync, mkdtempSync, utimesSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { sweepHubCache } from "./model/hub/cache-sweep";
import { refFile, repoCacheDir, snapshotDir } from "./model/hub/hub-config";

const HOUR = 3600_000;
const A = "a".repeat(40);
const B = "b".repeat(40);

/** A downloaded snapshot of `repo` at `commit`, its files written `ageMs` ago; refs/main names `main`. */
function snapshot(cache: string, repo: string, commit: string, ageMs: number, main?: string) {
  const dir = snapshotDir(cache, repo, commit);
  mkdirSync(path.join(dir, "onnx"), { recursive: true });
  writeFileSync(path.join(dir, "onnx/model.onnx"), Buffer.alloc(1000));
  writeFileSync(path.join(dir, "config.json"), "{}");
  if (main) {
    mkdirSync(path.dirname(refFile(cache, repo, "main")), { recursive: true });
    writeFileSync(refFile(cache, repo, "main"), main);
  }
  const then = (Date.now() - ageMs) / 1000;
  const touch = (p: string) => utimesSync(p, then, then);
  for (const p of [path.join(dir, "onnx/model.onnx"), path.join(dir, "config.json")]) touch(p);
  if (main) touch(refFile(cache, repo, "main")); // written as the download ended
  return dir;
}

describe("sweepHubCache", () => {
  it("removes a repository no model names, once unused for keepMs; keeps named ones and recent downloads", () => {
    const cache = mkdtempSync(path.join(os.tmpdir(), "lmp-sweep-"));
    snapshot(cache, "org/gone", A, 30 * HOUR, A);
    snapshot(cache, "org/kept", A, 30 * HOUR, A);
    snapshot(cache, "org/fresh", A, 10 * 60_000, A); // downloaded 10 minutes ago, then its deployment deleted
    const swept = sweepHubCache(cache, ["org/kept", "./local/folder"], 24 * HOUR);
    expect(swept.removed).toEqual(["models--org--gone"]);
    expect(swept.bytes).toBeGreaterThanOrEqual(1000);
    expect(existsSync(repoCacheDir(cache, "org/gone"))).toBe(false);
    expect(existsSync(snapshotDir(cache, "org/kept", A))).toBe(true);
    expect(existsSync(repoCacheDir(cache, "org/fresh"))).toBe(true);
    // A repository wanted until now counts its time from then, not from its download (30 h ago).
    expect(sweepHubCache(cache, [], 24 * HOUR, Date.now() + 2 * HOUR).removed).toEqual([]);
    expect(sweepHubCache(cache, [], 24 * HOUR, Date.now() + 25 * HOUR).removed.sort()).toEqual([
      "models--org--fresh",
      "models--org--kept",
    ]);
  });

  it("removes a snapshot no revision points to (its branch moved on), not one being downloaded", () => {
    const cache = mkdtempSync(path.join(os.tmpdir(), "lmp-sweep-"));
    snapshot(cache, "org/m", A, 30 * HOUR);
    snapshot(cache, "org/m", B, 30 * HOUR, B); // main moved from A to B
    const pinned = "c".repeat(40);
    snapshot(cache, "org/m", pinned, 30 * HOUR);
    mkdirSync(path.dirname(refFile(cache, "org/m", pinned)), { recursive: true });
    writeFileSync(refFile(cache, "org/m", pinned), pinned); // a deployment of org/m@<sha>
    // org/m@v1 was deployed, then deleted: its ref and snapshot go too.
    const v1 = "e".repeat(40);
    snapshot(cache, "org/m", v1, 30 * HOUR);
    writeFileSync(refFile(cache, "org/m", "v1"), v1);
    const old = (Date.now() - 30 * HOUR) / 1000;
    utimesSync(refFile(cache, "org/m", "v1"), old, old);
    const downloading = snapshotDir(cache, "org/m", "d".repeat(40));
    mkdirSync(path.join(downloading, "onnx"), { recursive: true });
    writeFileSync(path.join(downloading, "onnx/model.onnx.incomplete"), "partial");
    const swept = sweepHubCache(cache, ["org/m", `org/m@${pinned}`], 24 * HOUR);
    expect(swept.removed.sort()).toEqual([
      path.join("models--org--m", "snapshots", A),
      path.join("models--org--m", "snapshots", v1),
    ]);
    expect(existsSync(refFile(cache, "org/m", "v1"))).toBe(false);
    expect(existsSync(snapshotDir(cache, "org/m", B))).toBe(true);
    expect(existsSync(snapshotDir(cache, "org/m", pinned))).toBe(true);
    expect(existsSync(downloading)).toBe(true);
  });
});
