import { createHmac } from "node:crypto";
import { env } from "./env";

/**
 * The shared secret of the worker's internal inference API, derived from AUTH_SECRET so the
 * app and the workers agree without another setting (WORKER_SECRET overrides it).
 */
export function workerSecret(): string {
  const e = env();
  return e.WORKER_SECRET ?? createHmac("sha256", e.AUTH_SECRET).update("worker-internal:v1").digest("base64url");
}
