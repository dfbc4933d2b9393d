import type { ReactNode } from "react";
import { cx } from "./cx";

export function EmptyState({ title, children, icon }: { title: string; children?: ReactNode; icon?: ReactNode }) {
  return (
    <div
      data-testid="empty-state"
      className="rounded-lg border border-dashed border-zinc-300 px-6 py-12 text-center dark:border-zinc-700"
    >
      {icon ? <div className="mx-auto mb-3 flex justify-center text-zinc-400">{icon}</div> : null}
      <h2 className="text-base font-semibold">{title}</h2>
      {children ? (
        <div className="mx-auto mt-2 max-w-xl text-sm text-zinc-500 dark:text-zinc-400">{children}</div>
      ) : null}
    </div>
  );
}

/**
 * A query's failed refresh (a poll during a restart, say) over what it showed before: the data
 * stays, under this banner, rather than the banner replacing it. Nothing while the query is fine.
 */
export function RefreshError({ query }: { query: { isError: boolean; error: Error | null; refetch: () => unknown } }) {
  if (!query.isError) return null;
  return <ErrorBanner message={`Could not refresh: ${query.error?.message}`} onRetry={() => query.refetch()} />;
}

export function ErrorBanner({ message, onRetry }: { message: string; onRetry?: () => void }) {
  return (
    <div
      role="alert"
      className="flex items-center justify-between gap-3 rounded-md border border-red-200 bg-red-50 px-4 py-3 text-sm text-red-800 dark:border-red-900/60 dark:bg-red-950/40 dark:text-red-300"
    >
      <span>{message}</span>
      {onRetry ? (
        <button type="button" onClick={onRetry} className="font-medium underline underline-offset-2">
          Retry
        </button>
      ) : null}
    </div>
  );
}

export function Spinner({ className, label = "Loading" }: { className?: string; label?: string }) {
  return (
    <span role="status" aria-label={label} className={cx("inline-block", className)}>
      <span className="block size-4 animate-spin rounded-full border-2 border-current border-r-transparent opacity-70" />
    </span>
  );
}

export function Skeleton({ className }: { className?: string }) {
  return <div aria-hidden className={cx("animate-pulse rounded bg-zinc-200/80 dark:bg-zinc-800", className)} />;
}
