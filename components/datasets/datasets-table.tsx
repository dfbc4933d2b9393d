"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useState } from "react";
import type { DatasetDto } from "@/lib/contracts/datasets";
import { uiFetch } from "../api-client";
import { Badge } from "../ui/badge";
import { Button } from "../ui/button";
import { ConfirmDialog } from "../ui/confirm-dialog";
import { EmptyState, ErrorBanner, RefreshError } from "../ui/states";
import { DataTable, type Column } from "../ui/table";
import { Time } from "../ui/time";

const columns: Column[] = [
  { label: "Name" },
  { label: "Dataset string" },
  { label: "Samples", align: "right" },
  { label: "Status" },
  { label: "Created" },
  { label: "Actions", srOnly: true },
];

export function formatBytes(n: number | null): string {
  if (n === null) return "—";
  if (n < 1024) return `${n} B`;
  const units = ["KB", "MB", "GB", "TB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

/** The team's datasets; polls every second while one is PROCESSING, and stops after. */
/** `canDelete`: the signed-in user owns the team (members cannot delete datasets). */
export function DatasetsTable({ initial, canDelete }: { initial: DatasetDto[]; canDelete: boolean }) {
  const [deleting, setDeleting] = useState<DatasetDto | null>(null);
  const queryClient = useQueryClient();
  const q = useQuery({
    queryKey: ["datasets"],
    queryFn: ({ signal }) => uiFetch<DatasetDto[]>("/api/ui/datasets", { signal }),
    initialData: initial,
    refetchInterval: (query): number | false =>
      query.state.data?.some((d) => d.status === "PROCESSING") ? 1000 : false,
  });
  const download = useMutation({
    mutationFn: (id: string) => uiFetch<{ url: string }>(`/api/ui/datasets/${id}/download`),
    onSuccess: ({ url }) => {
      // A signed URL that answers with `content-disposition: attachment`: the page stays.
      const a = document.createElement("a");
      a.href = url;
      a.rel = "noreferrer";
      document.body.appendChild(a);
      a.click();
      a.remove();
    },
  });
  const remove = useMutation({
    mutationFn: (id: string) => uiFetch(`/api/ui/datasets/${id}`, { method: "DELETE" }),
    onSuccess: () => {
      setDeleting(null);
      queryClient.invalidateQueries({ queryKey: ["datasets"] });
    },
  });
  const stale = <RefreshError query={q} />;
  if (q.data.length === 0) {
    return (
      <>
        {stale}
        <EmptyState title="No datasets yet">
          <p>
            Open a{" "}
            <Link href="/pipelines" className="font-medium text-indigo-600 hover:underline dark:text-indigo-400">
              pipeline
            </Link>
            , filter its samples, and choose <span className="font-medium">Create dataset</span> to package the
            selection as a JSONL file.
          </p>
        </EmptyState>
      </>
    );
  }
  return (
    <>
      {stale}
      <>
        {download.isError ? <ErrorBanner message={download.error.message} /> : null}
        <DataTable testId="datasets-table" columns={columns}>
          {q.data.map((d) => (
            <tr key={d.id} data-dataset-id={d.id}>
              <td className="px-4 py-3 font-medium">
                <Link
                  href={`/datasets/${d.id}`}
                  className="hover:text-indigo-600 hover:underline dark:hover:text-indigo-400"
                >
                  {d.name}
                </Link>
              </td>
              <td className="px-4 py-3 font-mono text-xs">{d.datasetString}</td>
              <td className="px-4 py-3 text-right tabular-nums">
                {d.size.toLocaleString("en-US")}
                <div className="text-xs text-zinc-500 dark:text-zinc-400">{formatBytes(d.bytes)}</div>
              </td>
              <td className="px-4 py-3" data-testid="dataset-status">
                <StatusCell dataset={d} />
              </td>
              <td className="px-4 py-3 text-zinc-600 dark:text-zinc-400">
                <Time iso={d.createdAt} />
              </td>
              <td className="whitespace-nowrap px-4 py-3 text-right">
                <Button
                  variant="secondary"
                  size="sm"
                  // A split dataset has two files: they are downloaded from its page.
                  disabled={d.status !== "READY" || download.isPending || d.files.length !== 1}
                  aria-label={`Download ${d.name}`}
                  onClick={() => download.mutate(d.id)}
                >
                  Download
                </Button>{" "}
                {canDelete && (
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
          title={`Delete ${deleting?.name ?? "dataset"}?`}
          description="Its file is removed and its name becomes free. The samples stay in their pipeline."
          testId="delete-dataset-dialog"
          confirmLabel="Delete dataset"
          pendingLabel="Deleting…"
          pending={remove.isPending}
          error={remove.error}
          onConfirm={() => deleting && remove.mutate(deleting.id)}
        />
      </>
    </>
  );
}

function StatusCell({ dataset: d }: { dataset: DatasetDto }) {
  if (d.status === "READY") return <Badge tone="green">READY</Badge>;
  if (d.status === "FAILED") {
    return (
      <span title={d.error ?? undefined}>
        <Badge tone="red">FAILED</Badge>
      </span>
    );
  }
  const pct = d.size > 0 ? Math.round((100 * d.progress) / d.size) : 0;
  return (
    <div className="w-32 space-y-1">
      <Badge tone="amber">PROCESSING</Badge>
      <div
        role="progressbar"
        aria-label={`Packaging ${d.name}`}
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={pct}
        className="h-1.5 overflow-hidden rounded-full bg-zinc-200 dark:bg-zinc-800"
      >
        <div className="h-full rounded-full bg-amber-500 transition-[width]" style={{ width: `${pct}%` }} />
      </div>
    </div>
  );
}
