import Link from "next/link";
import type { DeploymentDto } from "@/lib/contracts/deployments";
import { CopyButton } from "../ui/copy-button";
import { EmptyState } from "../ui/states";
import { DataTable, type Column } from "../ui/table";
import { Time } from "../ui/time";

const columns: Column[] = [
  { label: "Name" },
  { label: "Model" },
  { label: "URL" },
  { label: "Created" },
  { label: "Actions", srOnly: true },
];

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
    <DataTable testId="deployments-table" columns={columns}>
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
    </DataTable>
  );
}
