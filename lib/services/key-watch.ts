import type postgres from "postgres";
import { changeFeedOf, type ChangeFeed } from "../db/change-feed";
import { perClient } from "../db/batch";
import { forbidden, unauthorized, type ApiError } from "../errors";

/**
 * Requests that outlive what admitted them stop. A request watches an id (its key, or its
 * member's place in the team) while it runs, and when that stops being valid, its `onRevoked` is
 * called with the error to end it with. New requests already fail at authentication; this is for
 * the streams and long generations that were admitted before.
 *
 * Checked when the change feed says one of `tables` changed (within milliseconds of the commit,
 * on every app process), and every `pollMs` while the feed is not listening. A request passes
 * the time its authentication started: a change seen since then (which what it was admitted with
 * may predate) is checked at once, so no revoke falls between the two. One query per check, for
 * all the ids this process watches, whatever their number.
 */
abstract class RevocationWatch {
  private readonly watched = new Map<string, Set<Watcher>>();
  /** The last change the feed told of (made now: one before this watch existed went unseen). */
  private lastChange = performance.now();
  private running: Promise<void> | undefined;
  private again = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    protected readonly sql: postgres.Sql,
    private readonly feed: ChangeFeed | undefined,
    tables: string[],
    private readonly pollMs: number,
  ) {
    feed?.onChange(tables, () => {
      this.lastChange = performance.now();
      if (this.watched.size > 0) void this.check();
    });
  }

  /** Of `ids`, those still valid. */
  protected abstract valid(ids: string[]): Promise<Set<string>>;

  /**
   * Calls `onRevoked` (once) with `error()` if `id` stops being valid while watched. `since` is
   * the `performance.now()` at which the request's authentication started. Returns the unwatch.
   */
  protected watchId(id: string, error: () => ApiError, since: number, onRevoked: (err: ApiError) => void): () => void {
    const watcher: Watcher = { error, onRevoked };
    let set = this.watched.get(id);
    if (!set) this.watched.set(id, (set = new Set()));
    set.add(watcher);
    this.timer ??= setInterval(() => {
      if (!this.feed?.listening) void this.check();
    }, this.pollMs).unref();
    if (this.lastChange >= since || !this.feed?.listening) void this.check();
    return () => this.unwatch(id, watcher);
  }

  /** Checks every watched id now (concurrent calls share a query, and one more after it). */
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
    const valid = await this.valid(ids);
    for (const id of ids) {
      if (valid.has(id)) continue;
      const watchers = this.watched.get(id);
      this.watched.delete(id);
      for (const w of watchers ?? []) w.onRevoked(w.error());
    }
    this.stopIfIdle();
  }

  private unwatch(id: string, watcher: Watcher): void {
    const set = this.watched.get(id);
    if (!set?.delete(watcher)) return;
    if (set.size === 0) this.watched.delete(id);
    this.stopIfIdle();
  }

  private stopIfIdle(): void {
    if (this.watched.size > 0 || !this.timer) return;
    clearInterval(this.timer);
    this.timer = undefined;
  }
}

type Watcher = { error: () => ApiError; onRevoked: (err: ApiError) => void };

/** Keys: revoked, deleted, or their team deleted. */
export class KeyWatch extends RevocationWatch {
  constructor(sql: postgres.Sql, feed: ChangeFeed | undefined, pollMs = POLL_MS) {
    super(sql, feed, ["api_keys", "teams"], pollMs);
  }

  watch(keyId: string, what: "API key" | "model key", since: number, onRevoked: (err: ApiError) => void): () => void {
    return this.watchId(keyId, () => unauthorized(`This ${what} has been revoked.`), since, onRevoked);
  }

  protected async valid(ids: string[]): Promise<Set<string>> {
    const rows = await this.sql<{ id: string }[]>`
      select k.id from api_keys k join teams t on t.id = k.team_id
      where k.revoked_at is null
        and k.id in (select jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb))`;
    return new Set(rows.map((r) => r.id));
  }
}

/** A signed-in member's place in a team: removed from it, or the team deleted. */
export class MemberWatch extends RevocationWatch {
  constructor(sql: postgres.Sql, feed: ChangeFeed | undefined, pollMs = POLL_MS) {
    super(sql, feed, ["memberships", "teams"], pollMs);
  }

  watch(member: { userId: string; teamId: string }, since: number, onRevoked: (err: ApiError) => void): () => void {
    return this.watchId(
      `${member.userId} ${member.teamId}`,
      () => forbidden("You are no longer a member of this team."),
      since,
      onRevoked,
    );
  }

  protected async valid(ids: string[]): Promise<Set<string>> {
    const rows = await this.sql<{ id: string }[]>`
      select m.user_id || ' ' || m.team_id as id from memberships m
      where (m.user_id, m.team_id) in (
        select split_part(w, ' ', 1), split_part(w, ' ', 2)
        from jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb) w)`;
    return new Set(rows.map((r) => r.id));
  }
}

/** How often watched keys are checked while the change feed is down. */
const POLL_MS = 5_000;

/** The key watch of a pool (one per process and database). */
export const keyWatchOf = perClient((sql: postgres.Sql) => new KeyWatch(sql, changeFeedOf(sql)));

/** The member watch of a pool (one per process and database). */
export const memberWatchOf = perClient((sql: postgres.Sql) => new MemberWatch(sql, changeFeedOf(sql)));

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
  const what = key.kind === "api" ? "API key" : "model key";
  return abortWhenRevoked(signal, (onRevoked) => keyWatchOf(sql).watch(key.id, what, since, onRevoked));
}

/**
 * The signal of a dashboard request that aborts when `signal` does or when the member leaves the
 * team (its reason then the 403), and the unwatch to call once the request is answered.
 */
export function abortOnRemoval(
  sql: postgres.Sql,
  member: { userId: string; teamId: string },
  since: number,
  signal: AbortSignal,
): { signal: AbortSignal; unwatch: () => void } {
  return abortWhenRevoked(signal, (onRevoked) => memberWatchOf(sql).watch(member, since, onRevoked));
}

/** `signal`, or a watch's revocation (its error the reason), whichever comes first. */
function abortWhenRevoked(
  signal: AbortSignal,
  watch: (onRevoked: (err: ApiError) => void) => () => void,
): { signal: AbortSignal; unwatch: () => void } {
  const revoked = new AbortController();
  const unwatch = watch((err) => revoked.abort(err));
  return { signal: AbortSignal.any([signal, revoked.signal]), unwatch };
}
