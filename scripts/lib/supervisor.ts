import { spawn, type ChildProcess } from "node:child_process";
import { repoRoot } from "./build";

/**
 * The launcher's children (the web app, the worker), kept running:
 * - a child that exits on its own is started again, after 1 s, then 2, 4 … up to 30 s while it
 *   keeps failing (back to 1 s once it has run for a minute); the others keep serving meanwhile
 *   (ingest needs no worker). A child that fails `maxQuickFailures` times in a row without ever
 *   running a minute is given up, and `onGiveUp` decides what happens: it returns true to keep
 *   trying (every 30 s; the launcher does so for the worker), else the launcher stops;
 * - each child has an IPC channel to this process and exits when it closes: when the launcher
 *   is killed (even with -9), its children go too (see exit-with-parent.cjs and workers/main.ts);
 * - `stop()` sends SIGTERM to all (they stop taking work and finish what is in flight) and
 *   SIGKILL to those still running after `graceMs`.
 */
export type Supervised = { name: string; readonly pid: number | undefined; readonly restarts: number };

type Entry = {
  name: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  child?: ChildProcess;
  restarts: number;
  failures: number;
  timer?: NodeJS.Timeout;
};

const HEALTHY_AFTER_MS = 60_000;
const MAX_BACKOFF_MS = 30_000;

export class Supervisor {
  private entries: Entry[] = [];
  private stopping = false;

  constructor(
    private readonly options: {
      maxQuickFailures?: number;
      /** True: keep starting it again, every MAX_BACKOFF_MS. */
      onGiveUp: (name: string) => boolean;
      log?: (line: string) => void;
    },
  ) {}

  start(name: string, args: string[], env: NodeJS.ProcessEnv): Supervised {
    const entry: Entry = { name, args, env, restarts: 0, failures: 0 };
    this.entries.push(entry);
    this.spawn(entry);
    return {
      name,
      get pid() {
        return entry.child?.pid;
      },
      get restarts() {
        return entry.restarts;
      },
    };
  }

  private spawn(entry: Entry): void {
    const log = this.options.log ?? ((line: string) => console.error(line));
    const startedAt = Date.now();
    const child = spawn(process.execPath, entry.args, {
      cwd: repoRoot,
      env: entry.env,
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    entry.child = child;
    child.on("exit", (code, signal) => {
      if (this.stopping) return;
      entry.failures = Date.now() - startedAt >= HEALTHY_AFTER_MS ? 1 : entry.failures + 1;
      const given = entry.failures > (this.options.maxQuickFailures ?? 5);
      if (given && !this.options.onGiveUp(entry.name)) {
        log(`[start] ${entry.name} keeps exiting (${signal ?? `code ${code}`}); giving up.`);
        return;
      }
      const delay = Math.min(1000 * 2 ** (entry.failures - 1), MAX_BACKOFF_MS);
      log(`[start] ${entry.name} exited (${signal ?? `code ${code}`}); restarting in ${delay / 1000} s.`);
      entry.timer = setTimeout(() => {
        entry.restarts++;
        this.spawn(entry);
      }, delay);
    });
  }

  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    await Promise.all(
      this.entries.map((entry) => {
        clearTimeout(entry.timer);
        const child = entry.child;
        return new Promise<void>((resolve) => {
          if (!child || child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once("exit", () => resolve());
          child.kill("SIGTERM");
          setTimeout(() => child.kill("SIGKILL"), graceMs).unref();
        });
      }),
    );
  }
}
