import { z } from "zod";

/**
 * Rate limits and quotas. Each team may override the defaults (env RATE_LIMIT_*); `null` or an
 * absent field means the default. Documented in docs/api.md ("Limits").
 */
export const LIMIT_FIELDS = [
  "requestsPerMinute",
  "tokensPerMinute",
  "concurrentStreams",
  "datasetJobs",
  "importJobs",
  "modelDeployments",
] as const;
export type LimitField = (typeof LIMIT_FIELDS)[number];

const limit = z.number().int().min(1).max(100_000_000);

export const TeamLimitOverrides = z.strictObject({
  /** Requests per minute, per key (API keys on /v1, model keys on deployments). */
  requestsPerMinute: limit.optional(),
  /** Prompt + completion tokens per minute, per key. */
  tokensPerMinute: limit.optional(),
  /** Generations (streamed or not) running at once, per key. */
  concurrentStreams: limit.optional(),
  /** Datasets being packaged (PROCESSING) at once, per team. */
  datasetJobs: limit.optional(),
  /** Imports waiting or running (PROCESSING) at once, per team: each holds its uploaded file. */
  importJobs: limit.optional(),
  /** Deployments of a model the workers load (not upstream ones) an owner may create from the dashboard, per team. */
  modelDeployments: limit.optional(),
});
export type TeamLimitOverrides = z.infer<typeof TeamLimitOverrides>;
export type TeamLimits = Required<TeamLimitOverrides>;
