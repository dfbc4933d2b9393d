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
  if (!res.ok) {
    throw new UiError(json?.error?.message ?? `Request failed (${res.status}).`, res.status, json?.error?.param);
  }
  return json as T;
}
