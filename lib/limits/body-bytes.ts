// Request bodies a team is sending at once (docs/api.md "Limits"). A body is held in memory while
// it is read, decoded, parsed and validated (about five times its size all told: an add-batch
// of 16 MiB came to some 80 MB), so one key sending a hundred large bodies in parallel took the
// app's memory, and every team's service with it. Counted per app process, by each body's
// Content-Length (or, without one, the route's limit) from before it is read to the answer.
import { env } from "../env";
import { rateLimited } from "../errors";

type State = { inFlight: Map<string, number> };
/** On globalThis: the App Router's and the Pages Router's bundles each have a copy of this module. */
const state = ((globalThis as unknown as { __lmpBodyBytes?: State }).__lmpBodyBytes ??= { inFlight: new Map() });

/**
 * Takes `bytes` of the team's in-flight body budget (TEAM_BODY_BYTES_IN_FLIGHT); 429 past it.
 * One body larger than the whole budget is let through when the team has none in flight (the
 * route's own size limit bounds it). Returns the release, to call once (more calls do nothing).
 */
function takeBodyBytes(teamId: string, bytes: number): () => void {
  const limit = env().TEAM_BODY_BYTES_IN_FLIGHT;
  const now = state.inFlight.get(teamId) ?? 0;
  if (now > 0 && now + bytes > limit)
    throw rateLimited(
      `Your team is sending ${mib(now)} of request bodies at once (limit ${mib(limit)}); retry when some have been answered.`,
      { "retry-after": "1" },
    );
  state.inFlight.set(teamId, now + bytes);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    const left = (state.inFlight.get(teamId) ?? bytes) - bytes;
    if (left > 0) state.inFlight.set(teamId, left);
    else state.inFlight.delete(teamId);
  };
}

/**
 * `read` (a body read, parsed and validated) with the body's bytes held against its team's budget
 * meanwhile: 429 before reading when the budget is spent; given back once `read` settles.
 */
export async function holdingBodyBytes<T>(
  teamId: string,
  contentLength: string | null | undefined,
  limit: number,
  read: () => Promise<T>,
): Promise<T> {
  const release = takeBodyBytes(teamId, declaredBytes(contentLength, limit));
  try {
    return await read();
  } finally {
    release();
  }
}

/** The bytes a body will take: its Content-Length, or the route's limit when it has none (chunked). */
function declaredBytes(contentLength: string | null | undefined, limit: number): number {
  const n = contentLength == null ? NaN : Number(contentLength);
  return Number.isFinite(n) && n >= 0 ? Math.min(n, limit) : limit;
}

const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
