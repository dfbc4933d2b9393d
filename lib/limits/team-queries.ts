// How many selection queries (samples, count, delete-samples) one team may run at once in an app
// process: DB_QUERIES_PER_TEAM, a few of the pool's 10 connections. Those past it wait their
// turn, a team's in order; past DB_QUERY_WAIT_MS of waiting (or with 100 already waiting), a 429.
// Before, one team's ten concurrent expensive selections (a sample of a million, a search over
// every sample) held every connection of the process for up to the statement timeout, and every
// other team's adds, lists and key lookups waited behind them.
import { env } from "../env";
import { rateLimited } from "../errors";

const MAX_WAITING = 100;

// On globalThis, like the rate limiters (./index.ts): Next.js may load the routes and pages that
// take slots as separate copies of this module, each with counters of its own.
const slots = ((globalThis as unknown as { __lmpQuerySlots?: QuerySlots }).__lmpQuerySlots ??= {
  running: new Map(),
  waiting: new Map(),
});
const { running, waiting } = slots;
type QuerySlots = { running: Map<string, number>; waiting: Map<string, (() => void)[]> };

/**
 * A slot for one selection query of `teamId`; resolves with its release (to call exactly once,
 * when the query and any stream of its rows are done).
 */
export async function takeQuerySlot(teamId: string): Promise<() => void> {
  const { DB_QUERIES_PER_TEAM: limit, DB_QUERY_WAIT_MS: waitMs } = env();
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    const next = waiting.get(teamId)?.shift();
    if (next) return next(); // the slot passes to the next in line
    const n = (running.get(teamId) ?? 1) - 1;
    if (n > 0) running.set(teamId, n);
    else running.delete(teamId);
    if (waiting.get(teamId)?.length === 0) waiting.delete(teamId);
  };
  const n = running.get(teamId) ?? 0;
  if (n < limit) {
    running.set(teamId, n + 1);
    return release;
  }
  const queue = waiting.get(teamId) ?? [];
  if (queue.length >= MAX_WAITING) throw busy(limit);
  waiting.set(teamId, queue);
  await new Promise<void>((resolve, reject) => {
    const turn = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      const i = queue.indexOf(turn);
      if (i >= 0) queue.splice(i, 1);
      reject(busy(limit));
    }, waitMs);
    queue.push(turn);
  });
  return release;
}

/** `run()` in one of `teamId`'s selection query slots, released however it ends. */
export async function withQuerySlot<T>(teamId: string, run: () => Promise<T>): Promise<T> {
  const release = await takeQuerySlot(teamId);
  try {
    return await run();
  } finally {
    release();
  }
}

const busy = (limit: number) =>
  rateLimited(`Your team already has ${limit} selection queries running; retry when one ends.`, {
    "retry-after": "1",
  });

/** `items`, releasing `release` once they are done, failed or given up (even before the first). */
export function releasingAfter<T>(items: AsyncIterable<T>, release: () => void): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator]() {
      const it = items[Symbol.asyncIterator]();
      return {
        async next() {
          try {
            const r = await it.next();
            if (r.done) release();
            return r;
          } catch (e) {
            release();
            throw e;
          }
        },
        async return(value?: unknown) {
          release();
          return (await it.return?.(value)) ?? { done: true as const, value: undefined as never };
        },
      };
    },
  };
}
