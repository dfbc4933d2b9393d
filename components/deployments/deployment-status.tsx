import type { DeploymentState } from "@/lib/contracts/deployments";
import { Badge } from "../ui/badge";

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(bytes < 1e7 ? 1 : 0)} MB`;

/** A deployment's state: a badge, and the download's progress bar or the failure's reason. */
export function DeploymentStatus({ status }: { status: DeploymentState }) {
  const tone = status.state === "ready" ? "green" : status.state === "failed" ? "red" : "amber";
  return (
    <div className="min-w-40 space-y-1" data-testid="deployment-state" data-state={status.state}>
      <Badge tone={tone}>{status.state}</Badge>
      {status.progress ? (
        <div>
          <div
            role="progressbar"
            aria-label="Download progress"
            aria-valuenow={status.progress.percent}
            aria-valuemin={0}
            aria-valuemax={100}
            className="h-1.5 w-full overflow-hidden rounded bg-zinc-200 dark:bg-zinc-800"
          >
            <div className="h-full bg-indigo-500" style={{ width: `${status.progress.percent}%` }} />
          </div>
          <div className="mt-0.5 text-xs text-zinc-500 dark:text-zinc-400">
            {status.progress.percent}% of {mb(status.progress.total)}
          </div>
        </div>
      ) : null}
      {status.message ? (
        <p className="max-w-64 text-xs text-zinc-600 dark:text-zinc-400" title={status.message}>
          {status.message}
        </p>
      ) : null}
    </div>
  );
}
