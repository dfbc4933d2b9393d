"use client";

import { keepPreviousData, useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect } from "react";
import type { PreviewSample } from "@/lib/contracts/capture";
import type { SampleDto } from "@/lib/contracts/pipelines";
import { filterOf, hasFilter, PAGE_SIZES, pageKey } from "@/lib/ui/selection-params";
import { uiFetch } from "../api-client";
import { invalidatePipeline, useSelectionCount } from "../pipelines/sample-count";
import { Button } from "../ui/button";
import { Card } from "../ui/card";
import { Select } from "../ui/field";
import { EmptyState, ErrorBanner, Skeleton, Spinner } from "../ui/states";
import { AddSamplesHelp } from "./add-samples-help";
import { CreateDatasetButton } from "./create-dataset-dialog";
import { FilterBar } from "./filter-bar";
import { SamplePanel } from "./sample-panel";
import { SamplesTable } from "./samples-table";
import { useSelectionUrl } from "./use-selection-url";

type Page = { samples: PreviewSample[] };

type Props = {
  pipelineId: string;
  publicUrl: string;
  /** The first page, rendered on the server for the URL the page was opened with. */
  initial: { key: string; page: Page; hasSamples: boolean };
  /** The team's deployment names (token counting in the create-dataset dialog). */
  deployments: string[];
};

export function SelectionView({ pipelineId, publicUrl, initial, deployments }: Props) {
  const { state, update } = useSelectionUrl();
  const filter = filterOf(state);
  const key = pageKey(pipelineId, state);
  const page = useQuery({
    queryKey: key,
    queryFn: ({ signal }) =>
      uiFetch<Page>(`/api/ui/pipelines/${pipelineId}/samples`, {
        body: { ...filter, limit: state.limit, offset: state.offset },
        signal,
      }),
    initialData: JSON.stringify(key) === initial.key ? initial.page : undefined,
    placeholderData: keepPreviousData,
  });
  const count = useSelectionCount(pipelineId, filter);
  // An empty pipeline shows how to add samples, and polls (a cheap count of 0) for the first one.
  // A pipeline with samples never counts them all just for that: on 1M samples that is the
  // most expensive query of the page.
  const total = useSelectionCount(pipelineId, {}, { pollWhileEmpty: true, enabled: !initial.hasSamples });
  // The first samples arrived while the page was open: its (empty) page and counts are stale.
  const queryClient = useQueryClient();
  const arrived = !initial.hasSamples && (total.data ?? 0) > 0;
  useEffect(() => {
    if (arrived) invalidatePipeline(queryClient, pipelineId);
  }, [arrived, queryClient, pipelineId]);
  const samples = page.data?.samples ?? [];
  const selectedIndex = samples.findIndex((s) => s.id === state.sample);
  const selected = selectedIndex >= 0 ? samples[selectedIndex] : undefined;

  useKeyboardNavigation(samples, selectedIndex, (id) => update({ sample: id }, "replace"));

  if (!initial.hasSamples && (total.data ?? 0) === 0 && !hasFilter(state)) {
    return <AddSamplesHelp publicUrl={publicUrl} pipelineId={pipelineId} />;
  }

  const from = samples.length > 0 ? state.offset + 1 : 0;
  const to = state.offset + samples.length;
  const hasNext = count.data !== undefined ? to < count.data : samples.length === state.limit;

  return (
    <div className="space-y-4">
      <FilterBar state={state} onChange={(patch) => update(patch)} />
      <div className="flex flex-wrap items-center justify-between gap-3 text-sm">
        <p aria-live="polite" className="text-zinc-600 dark:text-zinc-400">
          {count.isPending ? (
            <Skeleton className="inline-block h-4 w-40 align-middle" />
          ) : count.isError ? (
            "Count unavailable"
          ) : (
            <>
              <span
                data-testid="selection-count"
                className="font-semibold text-zinc-900 tabular-nums dark:text-zinc-100"
              >
                {count.data.toLocaleString("en-US")}
              </span>{" "}
              {count.data === 1 ? "sample" : "samples"} {hasFilter(state) ? "match" : "in this pipeline"}
            </>
          )}
          {page.isFetching ? <Spinner className="ml-2 align-middle text-zinc-400" label="Updating" /> : null}
        </p>
        <div className="flex items-center gap-2">
          {hasFilter(state) ? (
            <Button
              variant="ghost"
              size="sm"
              onClick={() =>
                update({
                  userId: undefined,
                  groupId: undefined,
                  metadata: {},
                  createdAfter: undefined,
                  createdBefore: undefined,
                  search: undefined,
                  generation: undefined,
                  importId: undefined,
                  sampleSize: undefined,
                  sampleSeed: undefined,
                  offset: 0,
                  sample: undefined,
                })
              }
            >
              Clear filters
            </Button>
          ) : null}
          <CreateDatasetButton pipelineId={pipelineId} filter={filter} count={count.data} deployments={deployments} />
        </div>
      </div>
      {page.isError ? <ErrorBanner message={page.error.message} onRetry={() => page.refetch()} /> : null}
      {page.isPending ? (
        <Card className="space-y-2 p-4">
          {Array.from({ length: 8 }, (_, i) => (
            <Skeleton key={i} className="h-8 w-full" />
          ))}
        </Card>
      ) : samples.length === 0 ? (
        <EmptyState title={state.offset > 0 ? "No samples on this page" : "No samples match these filters"}>
          <p>Remove a filter, or go back to the first page.</p>
        </EmptyState>
      ) : (
        <Card className="overflow-hidden">
          <SamplesTable
            samples={samples}
            selectedId={state.sample}
            onOpen={(id) => update({ sample: id }, "replace")}
            onMetadataClick={(k, v) =>
              update({ metadata: { ...state.metadata, [k]: v }, offset: 0, sample: undefined })
            }
          />
        </Card>
      )}
      <nav aria-label="Pagination" className="flex flex-wrap items-center justify-between gap-3 text-sm">
        <div className="flex items-center gap-2">
          <label htmlFor="page-size" className="whitespace-nowrap text-zinc-600 dark:text-zinc-400">
            Rows per page
          </label>
          <Select
            id="page-size"
            className="w-24"
            value={state.limit}
            onChange={(e) => update({ limit: Number(e.target.value), offset: 0 })}
          >
            {PAGE_SIZES.map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </Select>
        </div>
        <div className="flex items-center gap-3">
          <span className="tabular-nums text-zinc-600 dark:text-zinc-400" data-testid="page-range">
            {from.toLocaleString("en-US")}–{to.toLocaleString("en-US")}
            {count.data !== undefined ? ` of ${count.data.toLocaleString("en-US")}` : ""}
          </span>
          <Button
            variant="secondary"
            size="sm"
            disabled={state.offset === 0}
            onClick={() => update({ offset: Math.max(0, state.offset - state.limit), sample: undefined })}
          >
            Previous
          </Button>
          <Button
            variant="secondary"
            size="sm"
            disabled={!hasNext}
            onClick={() => update({ offset: state.offset + state.limit, sample: undefined })}
          >
            Next
          </Button>
        </div>
      </nav>
      {selected ? <SamplePanel sample={selected} onClose={() => update({ sample: undefined }, "replace")} /> : null}
    </div>
  );
}

/**
 * J / ArrowDown and K / ArrowUp move the open sample (arrows scroll the sample's own text), while
 * the focus is in the samples table or the sample panel: elsewhere the arrows scroll the page, and
 * a letter typed (or said, by speech input) does nothing (WCAG 2.1.4). Escape closes the panel.
 */
function useKeyboardNavigation(samples: SampleDto[], index: number, open: (id: string | undefined) => void) {
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.defaultPrevented || e.metaKey || e.ctrlKey || e.altKey) return;
      const target = e.target as HTMLElement | null;
      if (target?.closest("input, textarea, select, [contenteditable], dialog[open]")) return;
      const inList = target?.closest('[data-testid="samples-table"], [data-testid="sample-panel"]');
      if (!inList && e.key !== "Escape") return;
      // Inside the open sample's text, the arrow keys scroll it (J and K still move).
      if (e.key.startsWith("Arrow") && target?.closest("[data-scrolls-with-arrows]")) return;
      let next: number | undefined;
      if (e.key === "j" || e.key === "ArrowDown") next = index < 0 ? 0 : Math.min(samples.length - 1, index + 1);
      else if (e.key === "k" || e.key === "ArrowUp") next = index < 0 ? 0 : Math.max(0, index - 1);
      else if (e.key === "Escape" && index >= 0) {
        e.preventDefault();
        open(undefined);
        return;
      }
      if (next === undefined || samples.length === 0) return;
      e.preventDefault();
      const id = samples[next]!.id;
      open(id);
      document.querySelector<HTMLElement>(`tr[data-sample-id="${id}"]`)?.focus({ preventScroll: false });
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [samples, index, open]);
}
