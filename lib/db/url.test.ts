import { spawn, type ChildProcess } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { embeddedInfoFile, readEmbeddedInfo } from "./url";

let dir: string;
const children: ChildProcess[] = [];
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), "lmp-info-"));
});
afterEach(() => {
  for (const c of children.splice(0)) c.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

/** A live process whose command is `name` (a copy of `sleep`). */
function running(name: string): number {
  const bin = path.join(mkdtempSync(path.join(dir, "bin-")), name);
  copyFileSync("/bin/sleep", bin);
  const child = spawn(bin, ["60"], { stdio: "ignore" });
  children.push(child);
  return child.pid!;
}
const announce = (info: Record<string, unknown>) =>
  writeFileSync(embeddedInfoFile(dir), JSON.stringify({ url: "postgres://x", ...info }));

describe("readEmbeddedInfo", () => {
  it("reads a launcher that runs, with its postgres", () => {
    announce({ pid: running("node"), serverPid: running("postgres") });
    expect(readEmbeddedInfo(dir)?.url).toBe("postgres://x");
  });

  it("ignores what a killed launcher left behind, whoever got its pids since", async () => {
    announce({ pid: process.pid, serverPid: running("postgres") }); // this very process (a container restart)
    expect(readEmbeddedInfo(dir)).toBeUndefined();
    announce({ pid: running("node"), serverPid: running("bash") }); // the server's pid reused
    expect(readEmbeddedInfo(dir)).toBeUndefined();
    const server = running("postgres");
    const exited = new Promise((r) => children.at(-1)!.once("exit", r));
    children.at(-1)!.kill("SIGKILL");
    await exited;
    announce({ pid: running("node"), serverPid: server }); // the server is gone
    expect(readEmbeddedInfo(dir)).toBeUndefined();
  });

  it("ignores a file it cannot read", () => {
    writeFileSync(embeddedInfoFile(dir), "{");
    expect(readEmbeddedInfo(dir)).toBeUndefined();
  });
});
