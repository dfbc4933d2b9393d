import { linkSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import os from "node:os";

/**
 * A lock file that names its holder: created with O_EXCL, so one process holds it at a time,
 * released by removing it. A lock whose holder is gone (killed, or a container restarted under
 * it) is taken over: atomically, so that of two processes that find it abandoned one takes it,
 * and the lock the other made meanwhile is never removed by mistake.
 *
 * Used by the embedded database's launcher (one server per DATA_DIR) and by hub downloads (one
 * download of a file per cache, which may be shared by workers on several hosts).
 */
export type LockHolder = { pid: number; host?: string; start?: string };

/** What a lock file says now: undefined when there is none. */
export type LockState = { text: string; holder?: LockHolder; mtimeMs: number };

/**
 * Takes `file` if no one holds it: its release, or null. `beatMs` keeps the file's mtime fresh
 * while it is held, for `lockAbandoned`'s `staleMs` (holders on other hosts cannot be asked).
 */
export function tryLock(file: string, options: { beatMs?: number } = {}): (() => void) | null {
  const holder: LockHolder = { pid: process.pid, host: os.hostname(), start: processStart(process.pid) };
  try {
    writeFileSync(file, JSON.stringify(holder), { flag: "wx", mode: 0o600 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return null;
    throw err;
  }
  const beat = options.beatMs
    ? setInterval(() => {
        const now = new Date();
        try {
          utimesSync(file, now, now);
        } catch {
          // Taken over after all (this process was stopped past staleMs): nothing to keep fresh.
        }
      }, options.beatMs).unref()
    : undefined;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    clearInterval(beat);
    // Only our own lock: one taken over from us (we were stopped past staleMs) stays its holder's.
    if (readLock(file)?.text === JSON.stringify(holder)) rmSync(file, { force: true });
  };
}

/** The lock file's content and age; `holder` is missing while it is being written (or garbage). */
export function readLock(file: string): LockState | undefined {
  let text: string;
  let mtimeMs: number;
  try {
    mtimeMs = statSync(file).mtimeMs;
    text = readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
  try {
    const holder = JSON.parse(text) as LockHolder;
    return Number.isInteger(holder?.pid) ? { text, holder, mtimeMs } : { text, mtimeMs };
  } catch {
    return { text, mtimeMs };
  }
}

/**
 * Whether the lock's holder is gone: a process of this host that no longer runs, or whose pid
 * another process has since been given (its start time differs: a restarted container's pids are
 * reused at once), or this very pid (callers never wait on a lock they hold themselves). With
 * `staleMs`, a lock not touched for that long (its holder beats, see tryLock) counts as gone too:
 * the only sign of life of a holder on another host.
 */
export function lockAbandoned(lock: LockState, options: { staleMs?: number } = {}): boolean {
  if (options.staleMs !== undefined && Date.now() - lock.mtimeMs > options.staleMs) return true;
  const holder = lock.holder;
  if (!holder) return false;
  if (holder.host !== undefined && holder.host !== os.hostname()) return false;
  if (holder.pid === process.pid) return true;
  if (!alive(holder.pid)) return true;
  const start = holder.start === undefined ? undefined : processStart(holder.pid);
  return start !== undefined && start !== holder.start;
}

/**
 * Removes the abandoned lock `seen` (as readLock returned it), unless another process has taken
 * it over and locked again meanwhile: the file is moved aside first (of two processes, one moves
 * it), and a lock that is not the one seen is put back.
 */
export function takeOverLock(file: string, seen: LockState): void {
  const aside = `${file}.${process.pid}.stale`;
  try {
    renameSync(file, aside);
  } catch {
    return; // another process took it over first
  }
  let text: string | undefined;
  try {
    text = readFileSync(aside, "utf8");
  } catch {
    text = undefined;
  }
  if (text !== seen.text) {
    try {
      linkSync(aside, file);
    } catch {
      // Someone holds it already: theirs stands.
    }
  }
  rmSync(aside, { force: true });
}

/** Whether process `pid` exists (one of another user's counts). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * When process `pid` started, in clock ticks since boot (Linux's /proc/PID/stat, field 22): with
 * the pid, it names one process for good. Undefined elsewhere, or when the process is gone.
 */
export function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) is in parentheses and may hold spaces: count after its end.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}
