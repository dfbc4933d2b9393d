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

/**
 * Registers this worker process in the `workers` table and keeps its heartbeat fresh.
 * The app treats a worker whose heartbeat is older than a few intervals as gone.
 */
export async function registerWorker(db: Db, options: { heartbeatSeconds: number }): Promise<Registration> {
  const id = newId("worker");
  await db.insert(workers).values({ id, hostname: hostname(), pid: process.pid });
  const timer = setInterval(() => {
    db.update(workers)
      .set({ heartbeatAt: sql`now()` })
      .where(eq(workers.id, id))
      .then(
        () => {},
        (err: unknown) => logger().error({ err }, "heartbeat failed"),
      );
  }, options.heartbeatSeconds * 1000);
  timer.unref();
  return {
    id,
    advertise: async (fields) => {
      await db
        .update(workers)
        .set({ ...fields, heartbeatAt: sql`now()` })
        .where(eq(workers.id, id));
    },
    stop: async () => {
      clearInterval(timer);
      await db.delete(workers).where(eq(workers.id, id));
    },
  };
}
