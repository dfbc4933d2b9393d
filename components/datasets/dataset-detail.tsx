"use client";

import { useMutation, useQuery } from "@tanstack/react-query";
import type { DatasetDto } from "@/lib/contracts/datasets";
import { uiFetch } from "../api-client";
import { Badge } from "../ui/badge";
import { Button } from "../ui/button";
import { Card } from "../ui/card";
import { ErrorBanner, RefreshError } from "../ui/states";
import { formatBytes } from "./datasets-table";
import { TokenHistogram } from "./token-histogram";

const n = (x: number) => x.toLocaleString("en-US");

/** One dataset: its options, files (each downloadable), stats and token histogram; follows PROCESSING. */
export function DatasetDetail({ initial }: { initial: DatasetDto }) {
  const q = useQuery({
    queryKey: ["dataset", initial.id],
    queryFn: ({ signal }) => uiFetch<DatasetDto>(`/api/ui/datasets/${initial.id}`, { signal }),
    initialData: initial,
    refetchInterval: (query): number | false => (query.state.data?.status === "PROCESSING" ? 1000 : false),
  });
  const download = useMutation({
    mutationFn: (split: string | null) =>
      uiFetch<{ url: string }>(`/api/ui/datasets/${initial.id}/download${split ? `?split=${split}` : ""}`),
    onSuccess: ({ url }) => {
      const a = document.createElement("a");
      a.href = url;
      a.rel = "noreferrer";
      document.body.appendChild(a);
      a.click();
      a.remove();
    },
  });
  const stale = <RefreshError query={q} />;
  const d = q.data;
  const s = d.stats;
  const o = d.options;
  const options = [
    o.format === "parquet" ? "Parquet" : o.compression === "gzip" ? "JSONL, gzip" : "JSONL",
    o.dedupe ? "duplicates removed" : null,
    o.validate ? `validated (${o.validate})` : null,
    o.split
      ? `split ${Math.round(o.split.validation * 100)}% validation (seed ${o.split.seed}${o.split.by === "group" ? ", by group" : o.split.by === "user" ? ", by user" : ""})`
      : null,
    o.tokenizer ? `tokens counted with ${o.tokenizer}` : null,
    o.maxTokens !== undefined ? `at most ${n(o.maxTokens)} tokens` : null,
  ].filter(Boolean);
  return (
    <>
      {stale}
      <div className="space-y-6" data-testid="dataset-detail">
        <div className="flex flex-wrap items-center gap-3 text-sm">
          <span data-testid="dataset-status">
            <Badge tone={d.status === "READY" ? "green" : d.status === "FAILED" ? "red" : "amber"}>{d.status}</Badge>
          </span>
          <span className="text-zinc-600 dark:text-zinc-400">{options.join(" · ")}</span>
          {d.status === "PROCESSING" ? <span className="text-zinc-500">{n(d.progress)} samples read…</span> : null}
        </div>
        {d.error ? <ErrorBanner message={d.error} /> : null}
        {download.isError ? <ErrorBanner message={download.error.message} /> : null}
        {s ? (
          <dl className="grid grid-cols-2 gap-3 sm:grid-cols-4" data-testid="dataset-stats">
            <Stat label="Included" value={n(s.included)} />
            {s.splits ? (
              <Stat label="Train / validation" value={`${n(s.splits.train)} / ${n(s.splits.validation)}`} />
            ) : null}
            {s.skipped?.invalid !== undefined ? (
              <Stat
                label="Invalid"
                value={n(Object.values(s.skipped.invalid).reduce((a, b) => a + b, 0))}
                detail={reasons(s.skipped.invalid)}
              />
            ) : null}
            {s.skipped?.duplicate !== undefined ? <Stat label="Duplicates" value={n(s.skipped.duplicate)} /> : null}
            {s.skipped?.tooLong !== undefined ? <Stat label="Too long" value={n(s.skipped.tooLong)} /> : null}
            {s.skipped?.template !== undefined ? (
              <Stat label="Refused by the chat template" value={n(s.skipped.template)} />
            ) : null}
            {s.tokens ? (
              <>
                <Stat label="Tokens" value={n(s.tokens.total)} />
                <Stat label="p50 / p95 / max" value={`${n(s.tokens.p50)} / ${n(s.tokens.p95)} / ${n(s.tokens.max)}`} />
              </>
            ) : null}
          </dl>
        ) : null}
        {s?.tokens ? (
          <Card className="p-4">
            <h2 className="mb-2 text-sm font-semibold">Tokens per sample</h2>
            <TokenHistogram binWidth={s.tokens.histogram.binWidth} counts={s.tokens.histogram.counts} />
          </Card>
        ) : null}
        {d.files.length > 0 ? (
          <Card className="divide-y divide-zinc-200 dark:divide-zinc-800" data-testid="dataset-files">
            {d.files.map((f) => (
              <div key={f.name} className="flex items-center justify-between gap-3 px-4 py-3 text-sm">
                <div>
                  <div className="font-mono text-xs">{f.name}</div>
                  <div className="text-xs text-zinc-500 dark:text-zinc-400">
                    {n(f.samples)} samples · {formatBytes(f.bytes)}
                  </div>
                </div>
                <Button
                  variant="secondary"
                  size="sm"
                  aria-label={`Download ${f.name}`}
                  disabled={download.isPending}
                  onClick={() => download.mutate(f.split)}
                >
                  Download
                </Button>
              </div>
            ))}
          </Card>
        ) : null}
      </div>
    </>
  );
}

const reasons = (r: Record<string, number | undefined>) =>
  Object.entries(r)
    .map(([k, v]) => `${k.replaceAll("_", " ")}: ${n(v ?? 0)}`)
    .join(", ");

function Stat({ label, value, detail }: { label: string; value: string; detail?: string }) {
  return (
    <Card className="px-4 py-3">
      <dt className="text-xs text-zinc-500 dark:text-zinc-400">{label}</dt>
      <dd
        className="mt-1 text-lg font-semibold tabular-nums"
        data-testid={`stat-${label.toLowerCase().replace(/[^a-z]+/g, "-")}`}
      >
        {value}
      </dd>
      {detail ? <dd className="text-xs text-zinc-500 dark:text-zinc-400">{detail}</dd> : null}
    </Card>
  );
}
