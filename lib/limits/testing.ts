import { afterEach, beforeEach, vi } from "vitest";
import { resetEnvCache } from "../env";

/** For tests: the describe block runs with DB_QUERIES_PER_TEAM `limit` and DB_QUERY_WAIT_MS `waitMs`. */
export function withQuerySlots(limit: number, waitMs: number): void {
  beforeEach(() => {
    vi.stubEnv("DB_QUERIES_PER_TEAM", String(limit));
    vi.stubEnv("DB_QUERY_WAIT_MS", String(waitMs));
    resetEnvCache();
  });
  afterEach(() => {
    vi.unstubAllEnvs();
    resetEnvCache();
  });
}
