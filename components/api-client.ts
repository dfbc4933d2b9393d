import { pageTeamHeaders } from "./shell/page-team";

/** The dashboard's own JSON endpoints (`/api/ui/**`), called by client components. */
export class UiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly param?: string,
  ) {
    super(message);
  }
}

export async function uiFetch<T>(path: string, init: { method?: string; body?: unknown; signal?: AbortSignal } = {}) {
  const res = await fetch(path, {
    method: init.method ?? (init.body === undefined ? "GET" : "POST"),
    headers: { ...pageTeamHeaders(), ...(init.body === undefined ? {} : { "content-type": "application/json" }) },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
    signal: init.signal,
    cache: "no-store",
  });
  const json = (await res.json().catch(() => null)) as
    (T & { error?: undefined }) | { error?: { message?: string; param?: string } } | null;
  if (res.status === 401 && typeof window !== "undefined") {
    // The session ended (signed out in another tab, expired, a new AUTH_SECRET): a Retry could
    // never succeed; the sign-in page brings the member back here.
    // A full load on purpose: nothing of the ended session's client state should survive it.
    // eslint-disable-next-line @next/next/no-location-assign-relative-destination
    window.location.assign(`/sign-in?callbackUrl=${encodeURIComponent(location.pathname + location.search)}`);
  }
  if (!res.ok) {
    throw new UiError(json?.error?.message ?? `Request failed (${res.status}).`, res.status, json?.error?.param);
  }
  return json as T;
}
