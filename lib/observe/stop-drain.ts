// Writes still held in memory when the app is told to stop (usage counts summed for
// USAGE_FLUSH_MS, captured samples on their way to the database) are finished before it exits.
// The app server's SIGTERM / SIGINT handler (scripts/lib/app-server.mjs, as `next start`'s) closes
// the server, lets the requests in flight finish, and then calls process.exit: that last call is
// held until every drainer has run, for at most STOP_DRAIN_MS (10 s by default), so a database
// that no longer answers cannot hold the stop back (the launcher's SHUTDOWN_GRACE_SECONDS bounds
// it too). Kept on globalThis, like the
// recorders themselves: the App and Pages Router bundles each load their own copy of this module.
import { env } from "../env";
import { logger } from "./log";

type Drainer = () => Promise<unknown>;
type State = { drainers: Map<string, Drainer>; installed: boolean; stopping: boolean };
const holder = globalThis as unknown as { __lmpStopDrain?: State };
const state: State = (holder.__lmpStopDrain ??= { drainers: new Map(), installed: false, stopping: false });

/**
 * Registers `drain` (by name: registering the same name again replaces it) to run before the
 * process exits on SIGTERM or SIGINT.
 */
export function drainOnStop(name: string, drain: Drainer): void {
  state.drainers.set(name, drain);
  if (state.installed) return;
  state.installed = true;
  const onSignal = (signal: NodeJS.Signals) => {
    if (state.stopping) return;
    state.stopping = true;
    const exit = process.exit.bind(process);
    // Alone on this signal (not under Next.js): do what its default would, after the drain.
    if (process.listenerCount(signal) === 0) {
      void drainAll().finally(() => exit(signal === "SIGINT" ? 130 : 143));
      return;
    }
    let exiting = false;
    process.exit = ((code?: number | string | null) => {
      if (exiting) return exit(code) as never;
      exiting = true;
      void drainAll().finally(() => exit(code));
      return undefined as never;
    }) as typeof process.exit;
  };
  process.once("SIGTERM", onSignal);
  process.once("SIGINT", onSignal);
}

/** Runs every drainer, each failure logged, all within STOP_DRAIN_MS. */
export async function drainAll(): Promise<void> {
  const started = performance.now();
  const limitMs = env().STOP_DRAIN_MS;
  const all = Promise.allSettled(
    [...state.drainers].map(async ([name, drain]) => {
      try {
        await drain();
      } catch (err) {
        logger().error({ err, drainer: name }, "could not finish a write before stopping");
      }
    }),
  );
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), limitMs)));
  const outcome = await Promise.race([all, timedOut]);
  clearTimeout(timer);
  if (outcome === "timeout")
    logger().error({ ms: limitMs }, "stopping with writes unfinished: they did not end in time");
  else if (state.drainers.size > 0)
    logger().info({ ms: Math.round(performance.now() - started) }, "pending writes finished before stopping");
}
