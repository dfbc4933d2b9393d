"use client";

import { Button } from "@/components/ui/button";

/**
 * `retry` (Next 16) asks the server for the page again and then re-renders it; `reset` alone
 * would re-render the tree that failed, from the cache, and fail the same way.
 */
export default function DashboardError({
  error,
  retry,
}: {
  error: Error & { digest?: string };
  reset: () => void;
  retry: () => void;
}) {
  return (
    <div role="alert" className="mx-auto max-w-lg py-16 text-center">
      <h1 className="text-lg font-semibold">Something went wrong</h1>
      <p className="mt-2 text-sm text-zinc-500 dark:text-zinc-400">
        The page could not be loaded{error.digest ? ` (reference ${error.digest})` : ""}.
      </p>
      <Button className="mt-6" onClick={retry}>
        Try again
      </Button>
    </div>
  );
}
