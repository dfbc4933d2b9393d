"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import type { ApiKeyDto } from "@/lib/contracts/api-keys";
import { uiFetch } from "../api-client";
import { Badge } from "../ui/badge";
import { Button } from "../ui/button";
import { Card } from "../ui/card";
import { Dialog } from "../ui/dialog";
import { EmptyState, ErrorBanner } from "../ui/states";
import { Time } from "../ui/time";

const th = "px-4 py-2.5 text-left text-xs font-medium uppercase tracking-wide text-zinc-500 dark:text-zinc-400";

export function KeysTable({ initial }: { initial: ApiKeyDto[] }) {
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
  if (q.isError) return <ErrorBanner message={q.error.message} onRetry={() => q.refetch()} />;
  if (q.data.length === 0) {
    return (
      <EmptyState title="No keys yet">
        <p>Create an API key to send samples and build datasets, or a model key to call deployments.</p>
      </EmptyState>
    );
  }
  return (
    <>
      <Card className="overflow-hidden">
        <table className="w-full text-sm" data-testid="keys-table">
          <thead className="border-b border-zinc-200 bg-zinc-50 dark:border-zinc-800 dark:bg-zinc-900">
            <tr>
              <th className={th}>Label</th>
              <th className={th}>Kind</th>
              <th className={th}>Key</th>
              <th className={th}>Created</th>
              <th className={th}>Last used</th>
              <th className={th}>
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody className="divide-y divide-zinc-100 dark:divide-zinc-800">
            {q.data.map((k) => (
              <tr key={k.id} data-key-id={k.id} className={k.revokedAt ? "text-zinc-400 dark:text-zinc-500" : ""}>
                <td className="px-4 py-3 font-medium">{k.name ?? <span className="text-zinc-400">Untitled</span>}</td>
                <td className="px-4 py-3">
                  <Badge tone={k.kind === "api" ? "indigo" : "amber"}>{k.kind === "api" ? "API" : "Model"}</Badge>
                  {k.deploymentName ? (
                    <span className="ml-2 text-xs text-zinc-500 dark:text-zinc-400">only {k.deploymentName}</span>
                  ) : null}
                </td>
                <td className="px-4 py-3 font-mono text-xs">{k.prefix}…</td>
                <td className="px-4 py-3 text-zinc-600 dark:text-zinc-400">
                  <Time iso={k.createdAt} />
                </td>
                <td className="px-4 py-3 text-zinc-600 dark:text-zinc-400">
                  {k.lastUsedAt ? <Time iso={k.lastUsedAt} /> : "Never"}
                </td>
                <td className="px-4 py-3 text-right">
                  {k.revokedAt ? (
                    <Badge tone="red">Revoked</Badge>
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
          </tbody>
        </table>
      </Card>
      <Dialog
        open={revoking !== null}
        onClose={() => setRevoking(null)}
        title="Revoke this key?"
        description={
          <>
            <span className="font-medium">{revoking?.name ?? "Untitled"}</span> (
            <span className="font-mono">{revoking?.prefix}…</span>) stops working immediately. Requests made with it get
            401. This cannot be undone.
          </>
        }
        testId="revoke-dialog"
      >
        {revoke.isError ? <ErrorBanner message={revoke.error.message} /> : null}
        <div className="mt-2 flex justify-end gap-2">
          <Button variant="secondary" onClick={() => setRevoking(null)}>
            Cancel
          </Button>
          <Button variant="danger" disabled={revoke.isPending} onClick={() => revoking && revoke.mutate(revoking.id)}>
            {revoke.isPending ? "Revoking…" : "Revoke key"}
          </Button>
        </div>
      </Dialog>
    </>
  );
}
