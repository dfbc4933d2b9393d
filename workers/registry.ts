import { hostname } from "node:os";
import { eq, sql } from "drizzle-orm";
import type { Db } from "@/lib/db/client";
import { workers } from "@/lib/db/schema";
import type { ModelState } from "@/lib/contracts/models";
import { newId } from "@/lib/ids";
import { logger } from "@/lib/observe/log";

export type Registration = {
  id: string;
  /** Updates what the app sees of this worker (address of its inference server, models). */
  advertise: (fields: {
    address?: string | null;
    models?: string[];
    modelStates?: Record<string, ModelState>;
  }) => Promise<void>;
  stop: () => Promise<void>;
};

type Advertised = Parameters<Registration["advertise"]>[0];

/**
 * Registers this worker process in the `workers` table and keeps its heartbeat fresh.
 * The app treats a worker whose heartbeat is older than a few intervals as gone. A row removed
 * meanwhile (maintenance sweeps rows silent for an hour: a paused VM, a network split, a database
 * restored from a backup) is written again, with what was advertised, at the next heartbeat:
 * before, the heartbeats updated nothing and the worker ran on, unseen by the app, for good.
 */
export async function registerWorker(db: Db, options: { heartbeatSeconds: number }): Promise<Registration> {
  const id = newId("worker");
  const advertised: Advertised = {};
  let stopped = false;
  let inFlight: Promise<void> = Promise.resolve();
  const register = () =>
    db
      .insert(workers)
      .values({ id, hostname: hostname(), pid: process.pid, ...advertised })
      .onConflictDoNothing({ target: workers.id });
  /** Updates the row, one write at a time (a failed one does not hold the next back); writes it again when it is gone. */
  const update = (fields: Advertised) => (inFlight = inFlight.catch(() => {}).then(() => write(fields)));
  const write = async (fields: Advertised) => {
    // Once stopped, nothing is written: a load's progress published after stop() wrote the row
    // back, and the app sent requests to a server going away.
    if (stopped) return;
    const rows = await db
      .update(workers)
      .set({ ...fields, heartbeatAt: sql`now()` })
      .where(eq(workers.id, id))
      .returning({ id: workers.id });
    if (rows.length > 0) return;
    logger().warn(
      { worker: id },
      "this worker's registration was gone (removed after a long silence); registered again",
    );
    await register();
  };
  await register();
  const timer = setInterval(() => {
    update({}).catch((err: unknown) => logger().error({ err }, "heartbeat failed"));
  }, options.heartbeatSeconds * 1000);
  timer.unref();
  return {
    id,
    advertise: async (fields) => {
      Object.assign(advertised, fields);
      await update(fields);
    },
    stop: async () => {
      stopped = true;
      clearInterval(timer);
      await inFlight.catch(() => {});
      await db.delete(workers).where(eq(workers.id, id));
    },
  };
}
