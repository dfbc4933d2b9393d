import type { TeamLimits } from "../contracts/limits";
import type { DbOrTx } from "../db/client";
import type { Deployment } from "../db/schema";
import { isMemberLimitId, startGeneration, teamLimits } from "../limits";
import { appMetrics, metricsEnabled } from "../observe/metrics";
import type { KeyPrincipal } from "./api-keys";
import { recordUsage } from "./usage";

/**
 * The one place a completion's start and end are observed, whatever serves it: the key's quota
 * (a slot held while it runs, its tokens charged at the end), the metrics, and usage accounting.
 * `begin` throws the quota's 429 before anything is generated; its `end` is called exactly once.
 */
export type CompletionMeter = {
  /** The key the completion counts against (none: the dashboard's playground). */
  quota?: { keyId: string; limits: TeamLimits };
  /** The team's slug, for the `deployment` label (team/name). */
  teamSlug: string;
};

/** What a completion asked for with a key counts against: that key's quota, under its team's limits. */
export function keyMeter(principal: KeyPrincipal): CompletionMeter & { quota: { keyId: string; limits: TeamLimits } } {
  return { quota: { keyId: principal.key.id, limits: teamLimits(principal.team) }, teamSlug: principal.team.slug };
}

export type CompletionOutcome = {
  status: "ok" | "error" | "cancelled";
  promptTokens: number;
  completionTokens: number;
  /** Streamed completions: the time to their first token. */
  ttftMs?: number;
};

export function beginCompletion(
  db: DbOrTx,
  deployment: Pick<Deployment, "id" | "name" | "teamId">,
  meter: CompletionMeter | undefined,
): (outcome: CompletionOutcome) => void {
  const release = meter?.quota ? startGeneration(meter.quota.keyId, meter.quota.limits) : () => {};
  let ended = false;
  return (o) => {
    if (ended) return;
    ended = true;
    release(o.promptTokens + o.completionTokens);
    if (metricsEnabled() && meter) {
      const m = appMetrics();
      const label = { deployment: `${meter.teamSlug}/${deployment.name}` };
      m.generations.inc({ ...label, status: o.status });
      m.promptTokens.inc(label, o.promptTokens);
      m.generatedTokens.inc(label, o.completionTokens);
      if (o.ttftMs !== undefined) m.ttft.observe(label, o.ttftMs / 1000);
    }
    if (o.status !== "error" || o.promptTokens + o.completionTokens > 0) {
      recordUsage(db, {
        teamId: deployment.teamId,
        // A member's playground quota is not a key: its usage is the dashboard's ("").
        keyId: meter?.quota && !isMemberLimitId(meter.quota.keyId) ? meter.quota.keyId : null,
        deploymentId: deployment.id,
        promptTokens: o.promptTokens,
        completionTokens: o.completionTokens,
        ttftMs: o.ttftMs,
      });
    }
  };
}
