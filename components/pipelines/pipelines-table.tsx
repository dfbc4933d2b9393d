"use client";

import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import type { PipelineDto } from "@/lib/contracts/pipelines";
import { uiFetch } from "../api-client";
import { EmptyState, RefreshError } from "../ui/states";
import { DataTable, type Column } from "../ui/table";
import { Time } from "../ui/time";
import { CreatePipelineButton } from "./create-pipeline-dialog";
import { SampleCount } from "./sample-count";

const columns: Column[] = [
  { label: "Name" },
  { label: "Samples", align: "right" },
  { label: "Created" },
  { label: "Updated" },
];

export function PipelinesTable({ initial }: { initial: PipelineDto[] }) {
  const q = useQuery({
    queryKey: ["pipelines"],
    queryFn: ({ signal }) => uiFetch<PipelineDto[]>("/api/ui/pipelines", { signal }),
    initialData: initial,
  });
  const stale = <RefreshError query={q} />;
  if (q.data.length === 0) {
    return (
      <>
        {stale}
        <EmptyState title="No pipelines yet">
          <p>Create a pipeline, then send it chat samples from your application with the API.</p>
          <div className="mt-5">
            <CreatePipelineButton label="Create your first pipeline" />
          </div>
        </EmptyState>
      </>
    );
  }
  return (
    <>
      {stale}
      <DataTable testId="pipelines-table" columns={columns}>
        {q.data.map((p) => (
          <tr key={p.id} className="group hover:bg-zinc-50 dark:hover:bg-zinc-800/40">
            <td className="px-4 py-3">
              <Link
                href={`/pipelines/${p.id}`}
                className="font-medium text-zinc-900 group-hover:text-indigo-600 focus-visible:underline dark:text-zinc-100 dark:group-hover:text-indigo-400"
              >
                {p.name}
              </Link>
              <div className="font-mono text-xs text-zinc-500 dark:text-zinc-400">{p.id}</div>
            </td>
            <td className="px-4 py-3 text-right tabular-nums">
              <SampleCount pipelineId={p.id} />
            </td>
            <td className="px-4 py-3 text-zinc-600 dark:text-zinc-400">
              <Time iso={p.createdAt} />
            </td>
            <td className="px-4 py-3 text-zinc-600 dark:text-zinc-400">
              <Time iso={p.updatedAt} />
            </td>
          </tr>
        ))}
      </DataTable>
    </>
  );
}
