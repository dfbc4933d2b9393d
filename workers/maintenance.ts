import { logger } from "@/lib/observe/log";
import { setTimeout as sleep } from "node:timers/promises";
import type { BlobStore } from "@/lib/blob";
import type { DbOrTx } from "@/lib/db/client";
import { sweepDeletedDatasetFiles } from "@/lib/services/datasets";
import { sweepImportFiles } from "@/lib/services/import-jobs";
import { sql } from "drizzle-orm";
import { sweepHubCache } from "./engine/model/hub/cache-sweep";
import {
  applyRetention,
  GONE_WORKER_HOURS,
  purgeDeletedPipelines,
  sweepGoneWorkers,
  sweepIdempotencyKeys,
} from "@/lib/services/maintenance";

/**
 * The worker's maintenance, every `intervalSeconds` (and once at start): the samples of deleted
 * pipelines, then retention (samples older than their pipeline's retentionDays), then expired
 * idempotency keys, then the files of deleted datasets that their delete could not remove. Each
 * is batches of short transactions (lib/services/maintenance.ts), so nothing waits on it for
 * long; workers running it at once skip each other's rows.
 */
export function startMaintenance(o: {
  db: DbOrTx;
  blobs: BlobStore;
  intervalSeconds: number;
  batch: number;
  /** The hub cache to sweep (sweepHubCache), unless keepHours is 0; `alsoKeep`: WORKER_MODELS. */
  hubCache?: { dir: string; keepHours: number; alsoKeep?: string[] };
  log?: (line: string) => void;
}): { stop: () => Promise<void> } {
  const log = o.log ?? ((line: string) => logger().info(line));
  const shutdown = new AbortController();
  const loop = (async () => {
    while (!shutdown.signal.aborted) {
      // Each step on its own: one that fails (the database away, a bug) does not keep the others
      // from running; each stops between batches when the worker stops.
      const signal = shutdown.signal;
      const step = async (name: string, run: () => Promise<number>) => {
        try {
          return await run();
        } catch (err) {
          logger().error({ err, step: name }, "[maintenance] failed");
          return 0;
        }
      };
      const purged = await step("deleted pipelines", () => purgeDeletedPipelines(o.db, o.batch, signal));
      const expired = await step("retention", () => applyRetention(o.db, o.batch, signal));
      const keys = await step("idempotency keys", () => sweepIdempotencyKeys(o.db, 10 * o.batch, signal));
      const files = await step("deleted datasets' files", () => sweepDeletedDatasetFiles(o.db, o.blobs));
      const uploads = await step("finished imports' files", () => sweepImportFiles(o.db, o.blobs));
      const gone = await step("gone workers", () => sweepGoneWorkers(o.db));
      if (purged + expired + keys + files + uploads + gone > 0) {
        log(
          `[maintenance] deleted ${purged} samples of deleted pipelines, ${expired} past retention, ${keys} idempotency keys, ` +
            `the files of ${files} deleted datasets and of ${uploads} finished imports, ` +
            `the rows of ${gone} workers gone for ${GONE_WORKER_HOURS} h`,
        );
      }
      const hub = o.hubCache;
      if (hub && hub.keepHours > 0)
        await step("hub cache", async () => {
          const models = [...(await modelsInUse(o.db)), ...(hub.alsoKeep ?? [])];
          const swept = sweepHubCache(hub.dir, models, hub.keepHours * 3600_000);
          if (swept.removed.length > 0)
            log(
              `[maintenance] removed ${swept.removed.join(", ")} from the hub cache (${(swept.bytes / 1e9).toFixed(2)} GB), ` +
                `unused for ${hub.keepHours} h`,
            );
          return swept.removed.length;
        });
      await sleep(o.intervalSeconds * 1000, undefined, { signal: shutdown.signal }).catch(() => {});
    }
  })();
  return {
    stop: async () => {
      shutdown.abort();
      await loop;
    },
  };
}

/** Every model a deployment or a dataset being packaged (its tokenizer) names. */
async function modelsInUse(db: DbOrTx): Promise<string[]> {
  const rows = await db.execute<{ model: string }>(sql`
    select model from deployments
    union select tokenizer_model from datasets where status = 'PROCESSING' and tokenizer_model is not null`);
  return rows.map((r) => r.model);
}
