"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import type { ApiKeyDto } from "@/lib/contracts/api-keys";
import { uiFetch } from "../api-client";
import { Badge } from "../ui/badge";
import { Button } from "../ui/button";
import { ConfirmDialog } from "../ui/confirm-dialog";
import { EmptyState, RefreshError } from "../ui/states";
import { DataTable, type Column } from "../ui/table";
import { Time } from "../ui/time";

const columns: Column[] = [
  { label: "Label" },
  { label: "Kind" },
  { label: "Key" },
  { label: "Created by" },
  { label: "Created" },
  { label: "Last used" },
  { label: "Actions", srOnly: true },
];

/** `canRevoke`: the signed-in user owns the team (members see the keys but cannot revoke them). */
export function KeysTable({
  initial,
  pipelines,
  canRevoke,
}: {
  initial: ApiKeyDto[];
  /** The team's pipelines, to name a model key's capture scope (an id not among them is shown as is). */
  pipelines: { id: string; name: string }[];
  canRevoke: boolean;
}) {
  const [revoking, setRevoking] = useState<ApiKeyDto | null>(null);
  const queryClient = useQueryClient();
  const q = useQuery({
    queryKey: ["keys"],
    queryFn: ({ signal }) => uiFetch<ApiKeyDto[]>("/api/ui/keys", { signal }),
    initialData: initial,
  });
  const revoke = useMutation({
    mutationFn: (id: string) => uiFetch(`/api/ui/keys/${id}/revoke`, { method: "POST", body: {} }),
    onSuccess: () => {
      setRevoking(null);
      queryClient.invalidateQueries({ queryKey: ["keys"] });
    },
  });
  const stale = <RefreshError query={q} />;
  if (q.data.length === 0) {
    return (
      <>
        {stale}
        <EmptyState title="No keys yet">
          <p>Create an API key to send samples and build datasets, or a model key to call deployments.</p>
        </EmptyState>
      </>
    );
  }
  return (
    <>
      {stale}
      <>
        <DataTable testId="keys-table" columns={columns}>
          {q.data.map((k) => (
            <tr key={k.id} data-key-id={k.id} className={k.revokedAt ? "text-zinc-400 dark:text-zinc-500" : ""}>
              <td className="px-4 py-3 font-medium">{k.name ?? <span className="text-zinc-400">Untitled</span>}</td>
              <td className="px-4 py-3">
                <Badge tone={k.kind === "api" ? "indigo" : "amber"}>{k.kind === "api" ? "API" : "Model"}</Badge>
                {k.deploymentName ? (
                  <span className="ml-2 text-xs text-zinc-500 dark:text-zinc-400">only {k.deploymentName}</span>
                ) : null}
                {k.kind === "model" && k.capturePipelines !== null ? (
                  <span className="ml-2 text-xs text-zinc-500 dark:text-zinc-400" data-testid="key-capture">
                    {k.capturePipelines.length === 0
                      ? "no capture"
                      : `captures into ${k.capturePipelines
                          .map((id) => pipelines.find((p) => p.id === id)?.name ?? id)
                          .join(", ")}`}
                  </span>
                ) : null}
              </td>
              <td className="px-4 py-3 font-mono text-xs">{k.prefix}…</td>
              <td className="px-4 py-3 text-zinc-600 dark:text-zinc-400">
                {k.createdBy ?? <span title="Made with the CLI, or by a user since deleted">—</span>}
              </td>
              <td className="px-4 py-3 text-zinc-600 dark:text-zinc-400">
                <Time iso={k.createdAt} />
              </td>
              <td className="px-4 py-3 text-zinc-600 dark:text-zinc-400">
                {k.lastUsedAt ? <Time iso={k.lastUsedAt} /> : "Never"}
              </td>
              <td className="px-4 py-3 text-right">
                {k.revokedAt ? (
                  <Badge tone="red">Revoked</Badge>
                ) : !canRevoke ? (
                  <span className="text-xs text-zinc-500" title="Only owners of the team can revoke keys">
                    Owners revoke
                  </span>
                ) : (
                  <Button
                    variant="danger-ghost"
                    size="sm"
                    aria-label={`Revoke ${k.name ?? k.prefix}`}
                    onClick={() => setRevoking(k)}
                  >
                    Revoke
                  </Button>
                )}
              </td>
            </tr>
          ))}
        </DataTable>
        <ConfirmDialog
          open={revoking !== null}
          onClose={() => {
            setRevoking(null);
            revoke.reset(); // the next one opened starts without this one's error
          }}
          title="Revoke this key?"
          description={
            <>
              <span className="font-medium">{revoking?.name ?? "Untitled"}</span> (
              <span className="font-mono">{revoking?.prefix}…</span>) stops working immediately. Requests made with it
              get 401. This cannot be undone.
            </>
          }
          testId="revoke-dialog"
          confirmLabel="Revoke key"
          pendingLabel="Revoking…"
          pending={revoke.isPending}
          error={revoke.error}
          onConfirm={() => revoking && revoke.mutate(revoking.id)}
        />
      </>
    </>
  );
}
