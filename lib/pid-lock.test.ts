import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, utimesSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { lockAbandoned, processStart, readLock, takeOverLock, tryLock } from "./pid-lock";

const dir = () => mkdtempSync(path.join(os.tmpdir(), "pid-lock-"));
/** A pid that no process has now: a child that has exited. */
const gonePid = () => spawnSync(process.execPath, ["-e", ""]).pid!;

const children: ReturnType<typeof spawn>[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
});

describe("pid locks", () => {
  it("one holder at a time; released, the next takes it", () => {
    const file = path.join(dir(), "x.lock");
    const release = tryLock(file)!;
    expect(release).toBeTypeOf("function");
    expect(tryLock(file)).toBeNull();
    expect(readLock(file)!.holder).toMatchObject({ pid: process.pid, host: os.hostname() });
    release();
    expect(existsSync(file)).toBe(false);
    const again = tryLock(file);
    expect(again).not.toBeNull();
    again!();
  });

  it("a live holder is waited for; a gone one, or a pid since given to another process, is abandoned", () => {
    const file = path.join(dir(), "x.lock");
    const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"]);
    children.push(child);
    const start = processStart(child.pid!);
    expect(start).toMatch(/^\d+$/);
    const state = (holder: object) => {
      writeFileSync(file, JSON.stringify(holder));
      return readLock(file)!;
    };
    expect(lockAbandoned(state({ pid: child.pid, host: os.hostname(), start }))).toBe(false);
    // Written before lib/pid-lock.ts recorded start times: the pid alone.
    expect(lockAbandoned(state({ pid: child.pid }))).toBe(false);
    expect(lockAbandoned(state({ pid: gonePid(), host: os.hostname() }))).toBe(true);
    // The pid of a process that started at another time: the holder died, its pid was reused.
    expect(lockAbandoned(state({ pid: child.pid, host: os.hostname(), start: `${Number(start) - 1}` }))).toBe(true);
    // This process's pid, which does not hold it: left by an earlier process with our pid.
    expect(lockAbandoned(state({ pid: process.pid, host: os.hostname() }))).toBe(true);
    // Another host's holder cannot be asked: only a lock it stopped touching is abandoned.
    const remote = state({ pid: gonePid(), host: "elsewhere" });
    expect(lockAbandoned(remote, { staleMs: 30_000 })).toBe(false);
    const old = new Date(Date.now() - 60_000);
    utimesSync(file, old, old);
    expect(lockAbandoned(readLock(file)!, { staleMs: 30_000 })).toBe(true);
    // Being written (empty) is never abandoned by itself.
    expect(lockAbandoned(state({}))).toBe(false);
  });

  it("a holder's beat keeps its lock fresh", async () => {
    const file = path.join(dir(), "x.lock");
    const release = tryLock(file, { beatMs: 20 })!;
    const old = new Date(Date.now() - 60_000);
    utimesSync(file, old, old);
    await new Promise((r) => setTimeout(r, 100));
    // Touched again since (lockAbandoned would call it abandoned all the same: it names this process).
    expect(Date.now() - readLock(file)!.mtimeMs).toBeLessThan(30_000);
    release();
  });

  it("a take-over never removes the lock another process took meanwhile", () => {
    const file = path.join(dir(), "x.lock");
    writeFileSync(file, JSON.stringify({ pid: gonePid(), host: os.hostname() }));
    const seenByBoth = readLock(file)!;
    expect(lockAbandoned(seenByBoth)).toBe(true);
    // The first waiter takes it over and locks; the second, late, acts on what it saw before.
    takeOverLock(file, seenByBoth);
    const release = tryLock(file)!;
    expect(release).not.toBeNull();
    const mine = readFileSync(file, "utf8");
    takeOverLock(file, seenByBoth);
    expect(readFileSync(file, "utf8")).toBe(mine);
    expect(tryLock(file)).toBeNull();
    release();
    expect(existsSync(file)).toBe(false);
  });

  it("a release leaves alone a lock that was taken over from its holder", () => {
    const file = path.join(dir(), "x.lock");
    const release = tryLock(file)!;
    // Stopped past staleMs, the holder lost its lock to another host's process.
    writeFileSync(file, JSON.stringify({ pid: 1234, host: "elsewhere" }));
    release();
    expect(readLock(file)!.holder).toEqual({ pid: 1234, host: "elsewhere" });
  });
});
