import type postgres from "postgres";
import { changeFeedOf, type ChangeFeed } from "../db/change-feed";
import { perClient } from "../db/batch";
import { unauthorized, type ApiError } from "../errors";

/**
 * Generations that outlive their key's revocation stop: a request watches its key while it runs,
 * and when the key is revoked or deleted (or its team), the request's `onRevoked` is called with
 * the 401 to end it with. New requests with the key already fail at authentication; this is for
 * the streams and long generations that were admitted before.
 *
 * Checked when the change feed says api_keys or teams changed (within milliseconds of the
 * revoke's commit, on every app process), and every `pollMs` while the feed is not listening. A
 * request passes the time its authentication started: a change seen since then (which the key
 * it was admitted with may predate) is checked at once, so no revoke falls between the two.
 * One query per check, for all the keys this process watches, whatever their number.
 */
export class KeyWatch {
  private readonly watched = new Map<string, Set<Watcher>>();
  /** The last change the feed told of (made now: one before this watch existed went unseen). */
  private lastChange = performance.now();
  private running: Promise<void> | undefined;
  private again = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly sql: postgres.Sql,
    private readonly feed: ChangeFeed | undefined,
    private readonly pollMs = POLL_MS,
  ) {
    feed?.onChange(["api_keys", "teams"], () => {
      this.lastChange = performance.now();
      if (this.watched.size > 0) void this.check();
    });
  }

  /**
   * Calls `onRevoked` (once) if key `keyId` stops being valid while watched. `since` is the
   * `performance.now()` at which the request's authentication started. Returns the unwatch.
   */
  watch(keyId: string, what: "API key" | "model key", since: number, onRevoked: (err: ApiError) => void): () => void {
    const watcher: Watcher = { what, onRevoked };
    let set = this.watched.get(keyId);
    if (!set) this.watched.set(keyId, (set = new Set()));
    set.add(watcher);
    this.timer ??= setInterval(() => {
      if (!this.feed?.listening) void this.check();
    }, this.pollMs).unref();
    if (this.lastChange >= since || !this.feed?.listening) void this.check();
    return () => this.unwatch(keyId, watcher);
  }

  /** Checks every watched key now (concurrent calls share a query, and one more after it). */
  check(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = this.checkWatched()
      .catch(() => {}) // the database is away: the next change or poll checks again
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          void this.check();
        }
      });
    return this.running;
  }

  private async checkWatched(): Promise<void> {
    const ids = [...this.watched.keys()];
    if (ids.length === 0) return;
    const rows = await this.sql<{ id: string }[]>`
      select k.id from api_keys k join teams t on t.id = k.team_id
      where k.revoked_at is null
        and k.id in (select jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb))`;
    const valid = new Set(rows.map((r) => r.id));
    for (const id of ids) {
      if (valid.has(id)) continue;
      const watchers = this.watched.get(id);
      this.watched.delete(id);
      for (const w of watchers ?? []) w.onRevoked(unauthorized(`This ${w.what} has been revoked.`));
    }
    this.stopIfIdle();
  }

  private unwatch(keyId: string, watcher: Watcher): void {
    const set = this.watched.get(keyId);
    if (!set?.delete(watcher)) return;
    if (set.size === 0) this.watched.delete(keyId);
    this.stopIfIdle();
  }

  private stopIfIdle(): void {
    if (this.watched.size > 0 || !this.timer) return;
    clearInterval(this.timer);
    this.timer = undefined;
  }
}

type Watcher = { what: "API key" | "model key"; onRevoked: (err: ApiError) => void };

/** How often watched keys are checked while the change feed is down. */
const POLL_MS = 5_000;

/** The key watch of a pool (one per process and database). */
export const keyWatchOf = perClient((sql: postgres.Sql) => new KeyWatch(sql, changeFeedOf(sql)));

/**
 * A signal that aborts when `signal` does (the client left) or when the key is revoked (its
 * reason then the 401), and the unwatch to call once the request is answered.
 */
export function abortOnRevoke(
  sql: postgres.Sql,
  key: { id: string; kind: "api" | "model" },
  since: number,
  signal: AbortSignal,
): { signal: AbortSignal; unwatch: () => void } {
  const revoked = new AbortController();
  const unwatch = keyWatchOf(sql).watch(key.id, key.kind === "api" ? "API key" : "model key", since, (err) =>
    revoked.abort(err),
  );
  return { signal: AbortSignal.any([signal, revoked.signal]), unwatch };
}
