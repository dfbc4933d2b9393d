/**
 * Per-process token buckets, one per key (an API key, a team, an email, an address): `capacity`
 * units, refilled continuously at `capacity` per `periodMs`. A request takes its cost when the
 * bucket holds at least that much; usage measured afterwards (generated tokens) is taken with
 * `charge`, which may drive the bucket below zero (the next requests wait until it refills).
 * Idle full buckets are forgotten, so memory follows the active keys, not all keys ever seen.
 */
export type BucketState = { limit: number; remaining: number; resetSeconds: number; retryAfterSeconds: number };

type Bucket = { level: number; at: number; capacity: number };

export class TokenBuckets {
  private buckets = new Map<string, Bucket>();
  private sweptAt = Date.now();

  constructor(private readonly periodMs: number) {}

  private bucket(key: string, capacity: number, now: number): Bucket {
    let b = this.buckets.get(key);
    if (!b) this.buckets.set(key, (b = { level: capacity, at: now, capacity }));
    const rate = capacity / this.periodMs;
    b.level = Math.min(capacity, b.level + (now - b.at) * rate);
    b.at = now;
    b.capacity = capacity;
    return b;
  }

  /** Takes `cost` if there is that much; the state says what is left (or how long to wait). */
  take(key: string, capacity: number, cost = 1): { ok: boolean; state: BucketState } {
    const now = Date.now();
    this.sweep(now);
    const b = this.bucket(key, capacity, now);
    const ok = b.level >= cost;
    if (ok) b.level -= cost;
    return { ok, state: this.state(b, ok ? 0 : cost) };
  }

  /** Whether anything is left, without taking (for usage charged later). */
  peek(key: string, capacity: number): { ok: boolean; state: BucketState } {
    const b = this.bucket(key, capacity, Date.now());
    return { ok: b.level > 0, state: this.state(b, b.level > 0 ? 0 : Number.MIN_VALUE) };
  }

  /** Usage measured after the fact. */
  charge(key: string, capacity: number, amount: number): void {
    this.bucket(key, capacity, Date.now()).level -= amount;
  }

  private state(b: Bucket, need: number): BucketState {
    const rate = b.capacity / this.periodMs; // units per ms
    const missing = need > 0 ? Math.max(need, 0) - b.level : 0;
    return {
      limit: b.capacity,
      remaining: Math.max(0, Math.floor(b.level)),
      resetSeconds: Math.ceil((b.capacity - b.level) / rate / 1000),
      retryAfterSeconds: missing > 0 ? Math.max(1, Math.ceil(missing / rate / 1000)) : 0,
    };
  }

  private sweep(now: number): void {
    if (now - this.sweptAt < this.periodMs) return;
    this.sweptAt = now;
    for (const [key, b] of this.buckets) {
      if (b.level + (now - b.at) * (b.capacity / this.periodMs) >= b.capacity) this.buckets.delete(key);
    }
  }
}
