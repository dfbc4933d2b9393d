import type { DeploymentState } from "../contracts/deployments";
import { servedModelKey } from "../contracts/models";
import type { DbOrTx } from "../db/client";
import type { Deployment } from "../db/schema";
import { deploymentState, liveWorkers, unplacedMessage, type LiveWorker } from "./inference-routing";

/**
 * A deployment's state as its users see it, from what the live workers report: the best state
 * any of them has (ready, loading, downloading with bytes, pending, failed with the reason). No
 * live worker knowing it yet is `pending`, saying why.
 */
export function stateOf(
  live: LiveWorker[],
  d: Pick<Deployment, "model" | "dtype" | "teamId"> & Partial<Pick<Deployment, "upstreamKind">>,
): DeploymentState {
  // An upstream deployment is always ready as far as the platform knows: its servers are asked
  // on each request, and one that is down is reported then (503) and passed over for a while.
  if (d.upstreamKind) return { state: "ready", dtype: null, progress: null, message: null, reason: null };
  const s = deploymentState(live, servedModelKey(d.model, d.dtype), d.teamId);
  if (s?.state === "excluded")
    return { state: "pending", dtype: null, progress: null, message: unplacedMessage(d.model), reason: "excluded" };
  if (!s) {
    return {
      state: "pending",
      dtype: null,
      progress: null,
      message: live.length === 0 ? "No worker is running." : "Waiting for a worker to pick it up.",
      reason: null,
    };
  }
  const progress =
    s.state === "downloading" && s.total
      ? { done: s.done ?? 0, total: s.total, percent: Math.floor((100 * (s.done ?? 0)) / s.total) }
      : null;
  return {
    state: s.state,
    dtype: s.dtype ?? null,
    progress,
    message:
      s.state === "failed"
        ? (s.error ?? "failed to load")
        : s.state === "ready" && s.notes?.length
          ? s.notes.join(" ")
          : null,
    reason: s.reason ?? null,
  };
}

/** The states of some deployments, from one fresh read of the registry. */
export async function deploymentStates(
  db: DbOrTx,
  list: (Pick<Deployment, "model" | "dtype" | "teamId"> & Partial<Pick<Deployment, "upstreamKind">>)[],
): Promise<DeploymentState[]> {
  const live = await liveWorkers(db, { fresh: true });
  return list.map((d) => stateOf(live, d));
}
