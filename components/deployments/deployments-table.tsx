"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useState } from "react";
import type { DeploymentDto } from "@/lib/contracts/deployments";
import { uiFetch } from "../api-client";
import { Button } from "../ui/button";
import { ConfirmDialog } from "../ui/confirm-dialog";
import { CopyButton } from "../ui/copy-button";
import { EmptyState, RefreshError } from "../ui/states";
import { DataTable, type Column } from "../ui/table";
import { Time } from "../ui/time";
import { DeploymentStatus } from "./deployment-status";

const columns: Column[] = [
  { label: "Name" },
  { label: "Model" },
  { label: "State" },
  { label: "URL" },
  { label: "Created" },
  { label: "Actions", srOnly: true },
];

/** While a deployment downloads or loads, the list is polled every two seconds. */
const settling = (list: DeploymentDto[]) => list.some((d) => !["ready", "failed"].includes(d.status.state));

/** `canManage`: the signed-in user owns the team (members cannot delete deployments). */
export function DeploymentsTable({ initial, canManage }: { initial: DeploymentDto[]; canManage: boolean }) {
  const [deleting, setDeleting] = useState<DeploymentDto | null>(null);
  const queryClient = useQueryClient();
  const q = useQuery({
    queryKey: ["deployments"],
    queryFn: ({ signal }) => uiFetch<DeploymentDto[]>("/api/ui/deployments", { signal }),
    initialData: initial,
    refetchInterval: (query) => (settling(query.state.data ?? []) ? 2000 : false),
  });
  const remove = useMutation({
    mutationFn: (name: string) => uiFetch(`/api/ui/deployments/${encodeURIComponent(name)}`, { method: "DELETE" }),
    onSuccess: () => {
      setDeleting(null);
      queryClient.invalidateQueries({ queryKey: ["deployments"] });
      queryClient.invalidateQueries({ queryKey: ["keys"] }); // its model keys went with it
    },
  });
  const stale = <RefreshError query={q} />;
  if (q.data.length === 0) {
    return (
      <>
        {stale}
        <EmptyState title="No deployments yet">
          <p>
            {canManage ? "Deploy a model with the button above, or with " : "Owners deploy models, here or with "}
            <code className="font-mono">npm run cli -- deployment:create --team … --name … --model …</code>; it then
            appears here with its state, its URL and a playground.
          </p>
        </EmptyState>
      </>
    );
  }
  return (
    <>
      {stale}
      <>
        <DataTable testId="deployments-table" columns={columns}>
          {q.data.map((d) => (
            <tr key={d.id} data-deployment={d.name}>
              <td className="px-4 py-3 font-medium">{d.name}</td>
              <td className="max-w-56 px-4 py-3">
                <div className="truncate font-mono text-xs" title={d.model}>
                  {d.model}
                </div>
                {d.upstream ? (
                  <div className="truncate text-xs text-zinc-500 dark:text-zinc-400" title={d.upstream.urls.join(", ")}>
                    upstream {d.upstream.kind} · {d.upstream.urls.length} URL{d.upstream.urls.length > 1 ? "s" : ""}
                  </div>
                ) : (
                  <div className="text-xs text-zinc-500 dark:text-zinc-400">
                    {d.dtype}
                    {d.dtype === "auto" && d.status.dtype ? ` → ${d.status.dtype}` : ""}
                  </div>
                )}
              </td>
              <td className="px-4 py-3">
                <DeploymentStatus status={d.status} />
              </td>
              <td className="max-w-72 px-4 py-3">
                <div className="flex items-center gap-2">
                  <code className="truncate font-mono text-xs" title={d.url}>
                    {d.url}
                  </code>
                  <CopyButton text={d.url} label="Copy URL" />
                </div>
              </td>
              <td className="px-4 py-3 text-zinc-600 dark:text-zinc-400">
                <Time iso={d.createdAt} />
              </td>
              <td className="whitespace-nowrap px-4 py-3 text-right">
                <Link
                  href={`/playground?deployment=${encodeURIComponent(d.name)}`}
                  className="text-sm font-medium text-indigo-600 hover:underline dark:text-indigo-400"
                >
                  Playground
                </Link>{" "}
                {canManage && (
                  <Button
                    variant="danger-ghost"
                    size="sm"
                    aria-label={`Delete ${d.name}`}
                    onClick={() => setDeleting(d)}
                  >
                    Delete
                  </Button>
                )}
              </td>
            </tr>
          ))}
        </DataTable>
        <ConfirmDialog
          open={deleting !== null}
          onClose={() => {
            setDeleting(null);
            remove.reset(); // the next one opened starts without this one's error
          }}
          title={`Delete ${deleting?.name ?? "deployment"}?`}
          description={
            <>
              Its URL stops answering and the model keys scoped to it are deleted with it. The model files stay in the
              workers&apos; cache.
            </>
          }
          testId="delete-deployment-dialog"
          confirmLabel="Delete deployment"
          pendingLabel="Deleting…"
          pending={remove.isPending}
          error={remove.error}
          onConfirm={() => deleting && remove.mutate(deleting.name)}
        />
      </>
    </>
  );
}
