import { logger } from "@/lib/observe/log";
import { setTimeout as sleep } from "node:timers/promises";
import type { BlobStore } from "@/lib/blob";
import type { DbOrTx } from "@/lib/db/client";
import { sweepDeletedDatasetFiles } from "@/lib/services/datasets";
import { applyRetention, purgeDeletedPipelines, sweepIdempotencyKeys } from "@/lib/services/maintenance";

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
  log?: (line: string) => void;
}): { stop: () => Promise<void> } {
  const log = o.log ?? ((line: string) => logger().info(line));
  const shutdown = new AbortController();
  const loop = (async () => {
    while (!shutdown.signal.aborted) {
      try {
        const purged = await purgeDeletedPipelines(o.db, o.batch);
        const expired = await applyRetention(o.db, o.batch);
        const keys = await sweepIdempotencyKeys(o.db);
        const files = await sweepDeletedDatasetFiles(o.db, o.blobs);
        if (purged + expired + keys + files > 0) {
          log(
            `[maintenance] deleted ${purged} samples of deleted pipelines, ${expired} past retention, ${keys} idempotency keys, ` +
              `the files of ${files} deleted datasets`,
          );
        }
      } catch (err) {
        logger().error({ err }, "[maintenance] failed");
      }
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
