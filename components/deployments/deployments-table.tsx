import Link from "next/link";
import type { DeploymentDto } from "@/lib/contracts/deployments";
import { Card } from "../ui/card";
import { CopyButton } from "../ui/copy-button";
import { EmptyState } from "../ui/states";
import { Time } from "../ui/time";

const th = "px-4 py-2.5 text-left text-xs font-medium uppercase tracking-wide text-zinc-500 dark:text-zinc-400";

export function DeploymentsTable({ deployments }: { deployments: DeploymentDto[] }) {
  if (deployments.length === 0) {
    return (
      <EmptyState title="No deployments yet">
        <p>
          Deploy a model with{" "}
          <code className="font-mono">npm run cli -- deployment:create --team … --name … --model …</code>; it then
          appears here with its URL and a playground.
        </p>
      </EmptyState>
    );
  }
  return (
    <Card className="overflow-hidden">
      <table className="w-full text-sm" data-testid="deployments-table">
        <thead className="border-b border-zinc-200 bg-zinc-50 dark:border-zinc-800 dark:bg-zinc-900">
          <tr>
            <th className={th}>Name</th>
            <th className={th}>Model</th>
            <th className={th}>URL</th>
            <th className={th}>Created</th>
            <th className={th}>
              <span className="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody className="divide-y divide-zinc-100 dark:divide-zinc-800">
          {deployments.map((d) => (
            <tr key={d.id}>
              <td className="px-4 py-3 font-medium">{d.name}</td>
              <td className="max-w-56 truncate px-4 py-3 font-mono text-xs" title={d.model}>
                {d.model}
              </td>
              <td className="px-4 py-3">
                <div className="flex items-center gap-2">
                  <code className="truncate font-mono text-xs">{d.url}</code>
                  <CopyButton text={d.url} label="Copy URL" />
                </div>
              </td>
              <td className="px-4 py-3 text-zinc-600 dark:text-zinc-400">
                <Time iso={d.createdAt} />
              </td>
              <td className="px-4 py-3 text-right">
                <Link
                  href={`/playground?deployment=${encodeURIComponent(d.name)}`}
                  className="text-sm font-medium text-indigo-600 hover:underline dark:text-indigo-400"
                >
                  Playground
                </Link>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </Card>
  );
}
