import postgres from "postgres";

/**
 * Per-process caches of rows that every request reads (API keys, deployments), kept exact by
 * the database: triggers (drizzle/0003_cache_notify.sql) NOTIFY `lmp_cache` with the table's
 * name when such rows change, at commit, whoever changed them; each process LISTENs on a
 * connection of its own and drops the caches that read that table. A revoked key therefore
 * fails on every app process within milliseconds of the revoke's commit.
 *
 * Caching is on only while the LISTEN connection is up: a cache is emptied and bypassed from the
 * moment that connection closes until it listens again, so no notification can be missed. A value
 * loaded while an invalidation arrived is used for its request but not kept.
 */
export const CACHE_CHANNEL = "lmp_cache";

type CacheOptions = { tables: string[]; ttlMs: number; maxEntries: number };

export class ChangeCache<K, V> {
  private entries = new Map<K, { value: V; expires: number }>();
  private generation = 0;

  constructor(
    private readonly feed: ChangeFeed,
    readonly options: CacheOptions,
  ) {}

  clear(): void {
    this.entries.clear();
    this.generation++;
  }

  /**
   * The cached value, or `load()`'s, kept unless `keep` says otherwise (e.g. "not found"). Past
   * maxEntries the least recently used entry goes: a flood of lookups that each miss (random
   * deployment paths, sent by anyone without a key) pushes out only entries nobody used since,
   * where before the whole cache was emptied every maxEntries misses, every team's included.
   */
  async get(key: K, load: () => Promise<V>, keep: (value: V) => boolean = () => true): Promise<V> {
    if (!this.feed.listening) return load();
    const hit = this.entries.get(key);
    if (hit && hit.expires > Date.now()) {
      // Most recently used last (a Map iterates in insertion order).
      this.entries.delete(key);
      this.entries.set(key, hit);
      return hit.value;
    }
    const generation = this.generation;
    const value = await load();
    if (generation === this.generation && this.feed.listening && keep(value)) {
      this.entries.delete(key);
      while (this.entries.size >= this.options.maxEntries) this.entries.delete(this.entries.keys().next().value!);
      this.entries.set(key, { value, expires: Date.now() + this.options.ttlMs });
    }
    return value;
  }
}

export class ChangeFeed {
  listening = false;
  private caches = new Map<string, ChangeCache<unknown, unknown>>();
  private listeners = new Set<{ tables: string[]; onChange: () => void }>();
  private client: postgres.Sql | undefined;
  private closed = false;
  private retryMs = 100;

  constructor(private readonly url: string) {
    void this.connect();
  }

  /** The cache called `name`, made on first use. */
  cache<K, V>(name: string, options: CacheOptions): ChangeCache<K, V> {
    let cache = this.caches.get(name);
    if (!cache) this.caches.set(name, (cache = new ChangeCache<unknown, unknown>(this, options)));
    return cache as ChangeCache<K, V>;
  }

  /**
   * Calls `onChange` whenever rows of one of `tables` may have changed: a notification, or the
   * feed (re)connecting, which may have missed some. Returns the unsubscribe.
   */
  onChange(tables: string[], onChange: () => void): () => void {
    const listener = { tables, onChange };
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Drops the caches that read `table` (all of them without one), and tells the listeners. */
  invalidate(table?: string): void {
    for (const cache of this.caches.values()) {
      if (table === undefined || cache.options.tables.includes(table)) cache.clear();
    }
    for (const l of this.listeners) if (table === undefined || l.tables.includes(table)) l.onChange();
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    // `onnotify` is postgres.js's own hook (its `listen()` is built on it) but missing from its
    // types; it sees the notifications of this client's one connection.
    const options: postgres.Options<Record<string, never>> & { onnotify: (channel: string, payload: string) => void } =
      {
        max: 1,
        idle_timeout: 0,
        max_lifetime: null,
        fetch_types: false,
        onnotice: () => {},
        connection: { application_name: "lmplatform-cache" },
        onnotify: (channel, table) => {
          if (channel === CACHE_CHANNEL) this.invalidate(table);
        },
        onclose: () => this.lost(client),
      };
    const client: postgres.Sql = postgres(this.url, options);
    this.client = client;
    try {
      await client.unsafe(`listen ${CACHE_CHANNEL}`);
      this.invalidate(); // whatever changed before we listened
      this.listening = true;
      this.retryMs = 100;
    } catch {
      this.lost(client);
    }
  }

  private lost(client: postgres.Sql): void {
    if (this.client !== client) return;
    this.listening = false;
    this.invalidate();
    this.client = undefined;
    void client.end({ timeout: 0 }).catch(() => {});
    if (this.closed) return;
    setTimeout(() => void this.connect(), this.retryMs).unref();
    this.retryMs = Math.min(this.retryMs * 2, 5_000);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listening = false;
    const client = this.client;
    this.client = undefined;
    await client?.end({ timeout: 1 });
  }
}

// On globalThis: the App Router's and the Pages Router's bundles each load this module.
const feeds = ((globalThis as unknown as { __lmpFeeds?: WeakMap<object, ChangeFeed> }).__lmpFeeds ??= new WeakMap());

/** Ties a feed to a pool, so services holding only the pool (or a drizzle db on it) find it. */
export function attachChangeFeed(client: postgres.Sql, feed: ChangeFeed): void {
  feeds.set(client, feed);
}

/** The feed of a pool, if it has one (transactions and one-off connections have none: no caching). */
export function changeFeedOf(client: postgres.Sql): ChangeFeed | undefined {
  return feeds.get(client);
}
