"use client";

import { useQuery } from "@tanstack/react-query";
import { useRouter, useSearchParams } from "next/navigation";
import {
  Area,
  AreaChart,
  Bar,
  BarChart,
  CartesianGrid,
  Legend,
  ResponsiveContainer,
  Tooltip,
  XAxis,
  YAxis,
} from "recharts";
import type { UsageDashboard } from "@/lib/contracts/usage";
import { uiFetch } from "../api-client";
import { Card } from "../ui/card";
import { EmptyState, ErrorBanner, Skeleton } from "../ui/states";

const PERIODS = [7, 30, 90] as const;
const number = new Intl.NumberFormat("en");

function range(days: number) {
  const to = new Date();
  const from = new Date(to.getTime() - (days - 1) * 86_400_000);
  return { from: from.toISOString().slice(0, 10), to: to.toISOString().slice(0, 10) };
}

/** The usage page: a period, then charts of tokens and requests over time, by deployment, by key. */
export function UsageView() {
  // The period is in the URL (?days=7): kept on reload, and in a shared link.
  const params = useSearchParams();
  const router = useRouter();
  const asked = Number(params?.get("days"));
  const days = PERIODS.find((p) => p === asked) ?? 30;
  const setDays = (p: (typeof PERIODS)[number]) => router.replace(`?days=${p}`, { scroll: false });
  const { from, to } = range(days);
  const q = useQuery({
    queryKey: ["usage", from, to],
    queryFn: ({ signal }) => uiFetch<UsageDashboard>(`/api/ui/usage?from=${from}&to=${to}`, { signal }),
    // The page says new completions show up within a few seconds: it refreshes itself.
    refetchInterval: 5_000,
  });
  return (
    <div className="space-y-6">
      <div role="group" aria-label="Period" className="flex gap-1">
        {PERIODS.map((p) => (
          <button
            key={p}
            type="button"
            aria-pressed={days === p}
            onClick={() => setDays(p)}
            className="rounded-md border border-zinc-300 px-3 py-1 text-sm aria-pressed:border-indigo-500 aria-pressed:bg-indigo-50 dark:border-zinc-700 dark:aria-pressed:bg-indigo-950/40"
          >
            Last {p} days
          </button>
        ))}
      </div>
      {q.isError ? (
        <ErrorBanner message={q.error.message} onRetry={() => q.refetch()} />
      ) : q.isPending ? (
        <div className="space-y-4" aria-busy="true">
          <Skeleton className="h-72 w-full" />
          <Skeleton className="h-56 w-full" />
        </div>
      ) : q.data.byDay.every((d) => d.requests === 0) ? (
        <EmptyState title="No completions in this period">
          <p>Calls to your deployments (and the chat API) show up here within a few seconds.</p>
        </EmptyState>
      ) : (
        <Charts data={q.data} />
      )}
    </div>
  );
}

function Charts({ data }: { data: UsageDashboard }) {
  const totals = data.byDay.reduce(
    (a, d) => ({
      requests: a.requests + d.requests,
      tokens: a.tokens + d.promptTokens + d.completionTokens,
    }),
    { requests: 0, tokens: 0 },
  );
  return (
    <>
      <p className="text-sm text-zinc-600 dark:text-zinc-400" data-testid="usage-totals">
        {number.format(totals.requests)} requests, {number.format(totals.tokens)} tokens from {data.from} to {data.to}.
      </p>
      <Card className="p-4">
        <h2 className="mb-2 text-sm font-semibold">Tokens per day (UTC)</h2>
        <div className="h-72 w-full" data-testid="usage-tokens-chart" role="img" aria-label="Tokens per day">
          <ResponsiveContainer width="100%" height="100%">
            <AreaChart data={data.byDay} margin={{ top: 8, right: 16, bottom: 8, left: 8 }}>
              <CartesianGrid strokeDasharray="3 3" vertical={false} stroke="#e4e4e7" />
              <XAxis dataKey="day" tick={{ fontSize: 11 }} interval="preserveStartEnd" />
              <YAxis tick={{ fontSize: 11 }} width={56} />
              <Tooltip />
              <Legend />
              <Area
                type="linear"
                dataKey="promptTokens"
                name="prompt"
                stackId="t"
                stroke="#6366f1"
                fill="#c7d2fe"
                isAnimationActive={false}
              />
              <Area
                type="linear"
                dataKey="completionTokens"
                name="completion"
                stackId="t"
                stroke="#10b981"
                fill="#a7f3d0"
                isAnimationActive={false}
              />
            </AreaChart>
          </ResponsiveContainer>
        </div>
      </Card>
      <Card className="p-4">
        <h2 className="mb-2 text-sm font-semibold">Requests per day (UTC)</h2>
        <div className="h-56 w-full" data-testid="usage-requests-chart" role="img" aria-label="Requests per day">
          <ResponsiveContainer width="100%" height="100%">
            <BarChart data={data.byDay} margin={{ top: 8, right: 16, bottom: 8, left: 8 }}>
              <CartesianGrid strokeDasharray="3 3" vertical={false} stroke="#e4e4e7" />
              <XAxis dataKey="day" tick={{ fontSize: 11 }} interval="preserveStartEnd" />
              <YAxis allowDecimals={false} tick={{ fontSize: 11 }} width={56} />
              <Tooltip />
              <Bar dataKey="requests" fill="#6366f1" radius={[3, 3, 0, 0]} isAnimationActive={false} />
            </BarChart>
          </ResponsiveContainer>
        </div>
      </Card>
      <div className="grid gap-6 lg:grid-cols-2">
        <Card className="p-4">
          <h2 className="mb-2 text-sm font-semibold">By deployment</h2>
          <HorizontalBars data={data.byDeployment} testId="usage-deployments-chart" />
          <h3 className="mb-1 mt-4 text-xs font-semibold uppercase text-zinc-500">Time to first token (streams)</h3>
          <div className="h-48 w-full" data-testid="usage-ttft-chart" role="img" aria-label="Time to first token">
            <ResponsiveContainer width="100%" height="100%">
              <BarChart data={data.byDeployment} margin={{ top: 8, right: 16, bottom: 8, left: 8 }}>
                <CartesianGrid strokeDasharray="3 3" vertical={false} stroke="#e4e4e7" />
                <XAxis dataKey="name" tick={{ fontSize: 11 }} />
                <YAxis unit=" ms" tick={{ fontSize: 11 }} width={64} />
                <Tooltip formatter={(v) => (v === null ? "no streams" : `≤ ${v} ms`)} />
                <Legend />
                <Bar dataKey="ttftP50Ms" name="p50" fill="#6366f1" isAnimationActive={false} />
                <Bar dataKey="ttftP95Ms" name="p95" fill="#f59e0b" isAnimationActive={false} />
              </BarChart>
            </ResponsiveContainer>
          </div>
        </Card>
        <Card className="p-4">
          <h2 className="mb-2 text-sm font-semibold">By key</h2>
          <HorizontalBars data={data.byKey} testId="usage-keys-chart" />
        </Card>
      </div>
    </>
  );
}

function HorizontalBars({ data, testId }: { data: { name: string; tokens: number }[]; testId: string }) {
  return (
    <div className="w-full" style={{ height: 40 + 32 * data.length }} data-testid={testId} role="img">
      <ResponsiveContainer width="100%" height="100%">
        <BarChart data={data} layout="vertical" margin={{ top: 4, right: 16, bottom: 4, left: 8 }}>
          <CartesianGrid strokeDasharray="3 3" horizontal={false} stroke="#e4e4e7" />
          <XAxis type="number" tick={{ fontSize: 11 }} />
          <YAxis type="category" dataKey="name" tick={{ fontSize: 11 }} width={140} />
          <Tooltip formatter={(v) => [number.format(Number(v)), "tokens"]} />
          <Bar dataKey="tokens" fill="#10b981" radius={[0, 3, 3, 0]} isAnimationActive={false} />
        </BarChart>
      </ResponsiveContainer>
    </div>
  );
}
