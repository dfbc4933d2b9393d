"use client";

import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useState } from "react";
import type { SampleMessage } from "@/lib/contracts/messages";
import type { GenerationFacts, PreviewSample } from "@/lib/contracts/capture";
import { UiError } from "../api-client";
import { Button } from "../ui/button";
import { cx } from "../ui/cx";
import { ErrorBanner, Spinner } from "../ui/states";
import { Time } from "../ui/time";

type Message = SampleMessage;

/**
 * The signed URL is absolute (PUBLIC_URL); only its path and query are signed, so it is
 * fetched on this page's own origin, whatever host name the dashboard was opened with.
 */
export function sameOrigin(url: string): string {
  const u = new URL(url);
  return u.pathname + u.search;
}

async function fetchMessages(url: string, signal: AbortSignal): Promise<Message[]> {
  const res = await fetch(sameOrigin(url), { signal });
  const json = await res.json().catch(() => null);
  if (!res.ok) throw new UiError(json?.error?.message ?? `Could not load the sample (${res.status}).`, res.status);
  return json as Message[];
}

export function SamplePanel({ sample, onClose }: { sample: PreviewSample; onClose: () => void }) {
  const [view, setView] = useState<"chat" | "json">("chat");
  const queryClient = useQueryClient();
  const q = useQuery({
    // By URL too: a page fetched again signs its samples' URLs anew.
    queryKey: ["sample-content", sample.id, sample.url],
    queryFn: ({ signal }) => fetchMessages(sample.url, signal),
    staleTime: 5 * 60_000,
    retry: (n, err) => !(err instanceof UiError && err.status === 403) && n < 1,
  });
  // A signed URL past its expiry (a page left open longer than SIGNED_URL_TTL_SECONDS): the
  // pages are fetched again, which signs new URLs, and this sample's is then read.
  const expired = q.error instanceof UiError && q.error.status === 403;
  useEffect(() => {
    if (expired) void queryClient.invalidateQueries({ queryKey: ["samples"] });
  }, [expired, queryClient]);
  return (
    <aside
      aria-label={`Sample ${sample.id}`}
      data-testid="sample-panel"
      className="fixed inset-y-0 right-0 z-30 flex w-full max-w-xl flex-col border-l border-zinc-200 bg-white shadow-2xl dark:border-zinc-800 dark:bg-zinc-950"
    >
      <header className="flex items-start justify-between gap-3 border-b border-zinc-200 px-5 py-4 dark:border-zinc-800">
        <div className="min-w-0">
          <h2 className="truncate font-mono text-sm font-semibold">{sample.id}</h2>
          <p className="mt-0.5 text-xs text-zinc-500 dark:text-zinc-400">
            <Time iso={sample.createdAt} /> · {sample.length} message{sample.length === 1 ? "" : "s"}
            {sample.userId ? ` · user ${sample.userId}` : ""}
            {sample.groupId ? ` · group ${sample.groupId}` : ""}
          </p>
        </div>
        <Button variant="ghost" size="sm" onClick={onClose} aria-label="Close sample (Escape)">
          ✕
        </Button>
      </header>
      <div className="flex items-center justify-between gap-2 border-b border-zinc-200 px-5 py-2 dark:border-zinc-800">
        <div role="tablist" aria-label="Sample view" className="flex gap-1">
          {(
            [
              ["chat", "Conversation"],
              ["json", "Raw JSON"],
            ] as const
          ).map(([id, label]) => (
            <button
              key={id}
              role="tab"
              type="button"
              aria-selected={view === id}
              onClick={() => setView(id)}
              className={cx(
                "rounded-md px-2.5 py-1 text-xs font-medium",
                view === id
                  ? "bg-zinc-200/70 text-zinc-900 dark:bg-zinc-800 dark:text-white"
                  : "text-zinc-500 hover:text-zinc-900 dark:text-zinc-400 dark:hover:text-zinc-100",
              )}
            >
              {label}
            </button>
          ))}
        </div>
        <a
          href={sample.url}
          target="_blank"
          rel="noreferrer"
          className="text-xs font-medium text-indigo-600 hover:underline dark:text-indigo-400"
        >
          Signed URL ↗
        </a>
      </div>
      {/* Focusable (a click in it focuses it too): the arrow keys then scroll it, where elsewhere
          they move between samples (selection-view.tsx). */}
      <div
        className="flex-1 overflow-y-auto px-5 py-4 outline-none focus-visible:ring-2 focus-visible:ring-inset focus-visible:ring-indigo-500/30"
        role="tabpanel"
        tabIndex={0}
        data-scrolls-with-arrows
      >
        {q.isPending ? (
          <div className="flex justify-center py-10 text-zinc-400">
            <Spinner label="Loading conversation" />
          </div>
        ) : q.isError ? (
          <ErrorBanner message={q.error.message} onRetry={() => q.refetch()} />
        ) : view === "json" ? (
          <pre
            data-testid="sample-json"
            className="overflow-x-auto rounded-md bg-zinc-50 p-3 font-mono text-xs leading-relaxed dark:bg-zinc-900"
          >
            {JSON.stringify(q.data, null, 2)}
          </pre>
        ) : (
          <ol className="space-y-3" data-testid="chat">
            {q.data.map((m, i) => (
              <ChatBubble key={i} message={m} />
            ))}
          </ol>
        )}
        {sample.generation ? <GenerationFactsView facts={sample.generation} /> : null}
        {sample.metadata && Object.keys(sample.metadata).length > 0 ? (
          <dl className="mt-6 grid grid-cols-[auto_1fr] gap-x-4 gap-y-1 border-t border-zinc-200 pt-4 text-xs dark:border-zinc-800">
            {Object.entries(sample.metadata).map(([k, v]) => (
              <div key={k} className="contents">
                <dt className="font-mono text-zinc-500 dark:text-zinc-400">{k}</dt>
                <dd className="font-mono break-all">{v}</dd>
              </div>
            ))}
          </dl>
        ) : null}
      </div>
    </aside>
  );
}

/** What generated a captured completion: deployment, model, finish, tokens and timing. */
function GenerationFactsView({ facts }: { facts: GenerationFacts }) {
  const rows: [string, string][] = [
    ["deployment", facts.deployment],
    ["model", facts.model],
    ["endpoint", `${facts.endpoint}${facts.streamed ? " (streamed)" : ""}`],
    ["choice", `${facts.index + 1} of ${facts.n}`],
    [
      "finish reason",
      facts.stop !== null ? `${facts.finishReason} (${JSON.stringify(facts.stop)})` : facts.finishReason,
    ],
    ["tokens", `${facts.promptTokens} prompt · ${facts.completionTokens} completion`],
    ["latency", `${facts.latencyMs} ms${facts.ttftMs !== undefined ? ` · first token ${facts.ttftMs} ms` : ""}`],
    ["request id", facts.requestId],
    ["key", facts.keyId ?? "dashboard playground"],
  ];
  return (
    <section
      aria-label="Generation"
      data-testid="sample-generation"
      className="mt-6 border-t border-zinc-200 pt-4 text-xs dark:border-zinc-800"
    >
      <h3 className="mb-2 font-semibold uppercase tracking-wide text-zinc-400">Captured completion</h3>
      <dl className="grid grid-cols-[auto_1fr] gap-x-4 gap-y-1">
        {rows.map(([k, v]) => (
          <div key={k} className="contents">
            <dt className="text-zinc-500 dark:text-zinc-400">{k}</dt>
            <dd className="font-mono break-all">{v}</dd>
          </div>
        ))}
      </dl>
    </section>
  );
}

function ChatBubble({ message }: { message: Message }) {
  if (message.role === "system") {
    return (
      <li
        data-role="system"
        className="rounded-md border border-dashed border-zinc-300 px-3 py-2 text-xs text-zinc-600 dark:border-zinc-700 dark:text-zinc-400"
      >
        <div className="mb-1 font-semibold uppercase tracking-wide text-zinc-400">System</div>
        <p className="whitespace-pre-wrap">{message.content}</p>
      </li>
    );
  }
  const user = message.role === "user";
  const label = { user: "User", assistant: "Assistant", tool: "Tool" }[message.role];
  const calls = message.role === "assistant" ? (message.tool_calls ?? []) : [];
  return (
    <li data-role={message.role} className={cx("flex", user ? "justify-end" : "justify-start")}>
      <div
        className={cx(
          "max-w-[85%] rounded-2xl px-3.5 py-2 text-sm",
          user
            ? "rounded-br-sm bg-indigo-600 text-white"
            : "rounded-bl-sm bg-zinc-100 text-zinc-900 dark:bg-zinc-800 dark:text-zinc-100",
        )}
      >
        <div
          className={cx(
            "mb-0.5 text-[11px] font-medium",
            user ? "text-indigo-200" : "text-zinc-500 dark:text-zinc-400",
          )}
        >
          {label}
          {message.name ? ` · ${message.name}` : ""}
          {message.role === "tool" ? ` · ${message.tool_call_id}` : ""}
        </div>
        {message.content || calls.length === 0 ? (
          <p className="whitespace-pre-wrap break-words">
            {message.content || <em className="opacity-60">(empty)</em>}
          </p>
        ) : null}
        {calls.map((c) => (
          <pre
            key={c.id}
            data-testid="tool-call"
            className="mt-1 overflow-x-auto rounded bg-zinc-200/60 px-2 py-1 font-mono text-xs dark:bg-zinc-900"
          >
            {c.function.name}({c.function.arguments}) · {c.id}
          </pre>
        ))}
      </div>
    </li>
  );
}
