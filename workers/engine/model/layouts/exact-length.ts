// Layout "exact-length": graphs without position_ids, which derive positions from the past
// length (or the mask), and graphs whose rows must not share a padded pass (see pickLayout).
// Padding would shift those positions or change those numbers, so rows only share a pass with
// rows of the same length, and then without any padding: each group's past is exactly
// [rows, heads, length, head_dim], the shapes transformers.js' generate() feeds. Rows of
// different lengths run in separate passes; a joiner whose prompt length matches a group joins it.
//
// Each group keeps its cache in buffers of its own with room to grow (./kv-rows.ts, the stride
// being the group's length). A pass fetches only the fed token's column of each present (the
// graph's last-token outputs, ../last-token-outputs.ts); the cache is then re-strided in place to
// length + 1 (each row and head's block moves up by the columns before it) and the column written
// at the end. Taking the whole present as the next past instead cost a new buffer per entry per
// step: onnxruntime-node copies every fetched output into a fresh ArrayBuffer, and the garbage
// collector then had the whole cache to release each step. On the 134M bench model's q8 file,
// one row, a bare pass over 200 columns of past took 10.8–11.0 ms fetching its presents against
// 9.6–9.7 ms fetching the columns and moving the cache in place (docs/api.md, "Graph layouts").
//
// A hybrid model's recurrent states (past_conv.N…) are kept per group as well (./state-rows.ts):
// fed whole, the next ones written into a second set of buffers, the two swapped after the pass.
//
// A group that leaves gives its buffers to the next group to form (the room it grew is reused
// rather than faulted in again: requests one after another keep one set of buffers). Spare sets
// unused for KV_SHRINK_AFTER_MS are dropped, and there are never more of them than groups the
// batch once held at the same time, nor more than the batch's limit (BatchLimit) has room for
// beside the groups. A group's headroom stops at its rows' spans (./kv-rows.ts): groups form one
// after another, and the first to grow must not take the room the budget counted for the others.
import type { BatchLimit, DecodeBatch, PrefillState } from "./layout";
import type { GraphIo } from "./feeds";
import { KV_SHRINK_AFTER_MS, KvRows } from "./kv-rows";
import { kvState } from "./rows-batch";
import { onesMask, type KvArray, type OrtTensor } from "../session";
import { StateRows } from "./state-rows";

interface Group {
  /** Batch rows in this group, in the group's row order. */
  rows: number[];
  /** [rows.length, heads, length, head_dim] per cache entry: its stride is the group's length. */
  cache: KvRows;
  /** The rows' recurrent states, in the group's row order (graphs with states only). */
  states: StateRows | null;
}

export class ExactLengthBatch implements DecodeBatch {
  private groups: Group[] = [];
  private spare: { cache: KvRows; since: number }[] = [];
  private count = 0;
  /** Whether the graph has its last-token outputs: then only those are fetched. */
  private readonly sliced: boolean;
  /** Moved and allocated by the groups that have left (for the totals below). */
  private gone = { moved: 0, allocations: 0 };

  constructor(
    private readonly io: GraphIo,
    private readonly spareForMs = KV_SHRINK_AFTER_MS,
    private readonly limit: BatchLimit = () => Infinity,
  ) {
    this.sliced = io.sliced;
  }

  get size() {
    return this.count;
  }
  get bytes() {
    return this.caches().reduce((a, c) => a + c.bytes, 0) + this.groups.reduce((a, g) => a + (g.states?.bytes ?? 0), 0);
  }
  get columns() {
    return Math.max(0, ...this.groups.map((g) => g.cache.stride));
  }
  get moved() {
    return this.caches().reduce((a, c) => a + c.moved, this.gone.moved);
  }
  get allocations() {
    return this.caches().reduce((a, c) => a + c.allocations, this.gone.allocations);
  }

  private caches() {
    return [...this.groups.map((g) => g.cache), ...this.spare.map((s) => s.cache)];
  }

  reshape(keep: readonly number[], joiners: readonly PrefillState[]) {
    const now = performance.now();
    const newIndex = new Map(keep.map((old, i) => [old, i]));
    const groups: Group[] = [];
    for (const g of this.groups) {
      const kept = g.rows.flatMap((r, i) => (newIndex.has(r) ? [{ to: newIndex.get(r)!, i }] : []));
      if (kept.length === 0) {
        this.spare.push({ cache: g.cache, since: now });
        continue;
      }
      if (kept.length < g.rows.length) {
        g.cache.reshape(
          kept.map((k) => k.i),
          [],
          g.cache.stride,
        );
        g.states?.reshape(
          kept.map((k) => k.i),
          [],
        );
      }
      groups.push({ rows: kept.map((k) => k.to), cache: g.cache, states: g.states });
    }
    for (const s of this.spare.filter((s) => now - s.since >= this.spareForMs)) this.retire(s.cache);
    this.spare = this.spare.filter((s) => now - s.since < this.spareForMs);
    joiners.forEach((j, i) => {
      const row = keep.length + i;
      const alone = this.io.sig.rowsInteract || this.io.sig.batchOfOne;
      const same = alone ? undefined : groups.find((g) => g.cache.stride === j.length);
      if (same) {
        same.cache.reshape([...same.rows.keys()], [j], j.length);
        same.states?.reshape([...same.rows.keys()], [j]);
        same.rows.push(row);
        return;
      }
      const cache = this.takeSpare();
      cache.reshape([], [j], j.length);
      const states = this.io.sig.states.length ? new StateRows(this.io.sig.states) : null;
      states?.reshape([], [j]);
      groups.push({ rows: [row], cache, states });
    });
    this.groups = groups;
    this.count = keep.length + joiners.length;
    // Spare sets that the limit has no room for beside the groups go, the longest unused first.
    while (this.spare.length > 0 && this.bytes > this.limit()) this.retire(this.spare.shift()!.cache);
  }

  /** DecodeBatch.extract. */
  extract(row: number, from = 0): PrefillState | null {
    const g = this.groups.find((g) => g.rows.includes(row));
    return !g || g.states ? null : kvState(this.io, g.cache.extract(g.rows.indexOf(row), from));
  }

  /** The most recently freed spare set (the likeliest to be in memory still), or a new one. */
  private takeSpare(): KvRows {
    const { kv } = this.io.sig;
    return (
      this.spare.pop()?.cache ??
      new KvRows(
        { type: kv.type, entries: kv.entries.length, heads: kv.heads, headDim: kv.headDim },
        this.spareForMs,
        () => 0, // headroom up to the rows' spans only (see above)
      )
    );
  }

  private retire(cache: KvRows) {
    this.gone.moved += cache.moved;
    this.gone.allocations += cache.allocations;
  }

  async step(tokens: readonly number[], between?: () => Promise<void>): Promise<Float32Array[]> {
    const { kv } = this.io.sig;
    const D = kv.headDim;
    const out: Float32Array[] = new Array(this.count);
    for (const [i, g] of this.groups.entries()) {
      if (i > 0 && between) await between();
      const n = g.rows.length;
      const length = g.cache.stride;
      const states = g.states?.io();
      const fetches: Record<string, OrtTensor | null> = { logits: null, ...states?.fetches };
      for (const e of kv.entries) fetches[this.sliced ? e.lastToken! : e.present] = null;
      const result = await this.io.session.run(
        {
          ...states?.feeds,
          ...this.io.inputs(
            g.rows.map((r) => tokens[r]),
            n,
            1,
            () => new Array<number>(n).fill(length),
            true,
          ),
          attention_mask: onesMask(n, length + 1),
          ...this.io.past(
            kv.entries.map((_, e) => g.cache.view(e)),
            [n, kv.heads, length, D],
          ),
        },
        fetches,
      );
      // [n, heads, 1, D] (or the whole present, [n, heads, length + 1, D]): its last column goes
      // to column `length` of the cache, re-strided in place to length + 1.
      g.cache.resize(length + 1);
      g.cache.storeNewColumns(
        kv.entries.map((e) => result[this.sliced ? e.lastToken! : e.present].data as KvArray),
        0,
        n,
        this.sliced ? 1 : length + 1,
      );
      g.cache.lengths.fill(length + 1);
      g.states?.advance();
      this.io.lastLogits(result.logits, n).forEach((row, r) => (out[g.rows[r]] = row));
    }
    return out;
  }
}
