"use client";

import { type QueryClient, useQuery } from "@tanstack/react-query";
import type { SelectionFilter } from "@/lib/ui/selection-params";
import { uiFetch } from "../api-client";
import { Skeleton } from "../ui/states";

export const countKey = (pipelineId: string, filter: SelectionFilter) => ["count", pipelineId, filter] as const;

/** Every page and count of the pipeline's selections is stale (new samples came, an import ended). */
export function invalidatePipeline(queryClient: QueryClient, pipelineId: string): void {
  void queryClient.invalidateQueries({ queryKey: ["samples", pipelineId] });
  void queryClient.invalidateQueries({ queryKey: ["count", pipelineId] });
}

export function useSelectionCount(
  pipelineId: string,
  filter: SelectionFilter,
  options: { pollWhileEmpty?: boolean; enabled?: boolean } = {},
) {
  return useQuery({
    queryKey: countKey(pipelineId, filter),
    queryFn: ({ signal }) =>
      uiFetch<{ count: number }>(`/api/ui/pipelines/${pipelineId}/count`, { body: filter, signal }).then(
        (r) => r.count,
      ),
    enabled: options.enabled ?? true,
    refetchInterval: (q): number | false => (options.pollWhileEmpty && q.state.data === 0 ? 3000 : false),
  });
}

/** A pipeline's sample count, fetched after first paint so the list never waits for it. */
export function SampleCount({ pipelineId }: { pipelineId: string }) {
  const q = useSelectionCount(pipelineId, {});
  if (q.isPending) return <Skeleton className="ml-auto h-4 w-12" />;
  if (q.isError)
    return (
      <span className="text-zinc-400" title={q.error.message}>
        —
      </span>
    );
  return <span data-testid="sample-count">{q.data.toLocaleString("en-US")}</span>;
}
