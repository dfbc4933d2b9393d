"use client";

import { usePathname, useSearchParams } from "next/navigation";
import { useCallback, useMemo } from "react";
import { parseSelectionParams, selectionToSearch, type SelectionState } from "@/lib/ui/selection-params";

/**
 * The selection state is the URL. Changes go through the History API, which Next's router
 * follows (useSearchParams updates) without a server round trip: only the client queries run.
 */
export function useSelectionUrl() {
  const searchParams = useSearchParams();
  const pathname = usePathname();
  const state = useMemo(
    () => parseSelectionParams(new URLSearchParams(searchParams?.toString() ?? "")),
    [searchParams],
  );
  const update = useCallback(
    (patch: Partial<SelectionState>, mode: "push" | "replace" = "push") => {
      const next = { ...state, ...patch };
      const search = selectionToSearch(next);
      const url = search ? `${pathname}?${search}` : pathname;
      if (mode === "push") window.history.pushState(null, "", url);
      else window.history.replaceState(null, "", url);
    },
    [state, pathname],
  );
  return { state, update };
}
