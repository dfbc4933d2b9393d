// What the layouts whose rows live in one KvRows cache (padded, gqa) share: the figures a
// DecodeBatch reports, and copying each row's fetched new column into its place.
import type { GraphIo } from "./feeds";
import { KvRows } from "./kv-rows";
import type { KvArray } from "../session";

export abstract class RowsBatch {
  protected readonly cache: KvRows;
  /** Whether the graph has its new-column outputs (../last-token-outputs.ts): then only those are fetched. */
  protected readonly sliced: boolean;

  constructor(protected readonly io: GraphIo) {
    const { kv } = io.sig;
    this.cache = new KvRows({ type: kv.type, entries: kv.entries.length, heads: kv.heads, headDim: kv.headDim });
    this.sliced = kv.entries.every((e) => e.lastToken);
  }

  get size() {
    return this.cache.size;
  }
  get bytes() {
    return this.cache.bytes;
  }
  get columns() {
    return this.cache.stride;
  }
  /** Bytes of cache copied by membership and capacity changes so far. */
  get moved() {
    return this.cache.moved;
  }
  get allocations() {
    return this.cache.allocations;
  }

  /**
   * Rows r0..r1-1's new keys/values, the last column of `fetched` ([r1 - r0, heads, columns, D]
   * per entry), to column length_r of their cache rows.
   */
  protected storeNewColumns(fetched: readonly KvArray[], r0: number, r1: number, columns: number) {
    const { heads, headDim: D } = this.io.sig.kv;
    const cap = this.cache.stride;
    const lengths = this.cache.lengths;
    fetched.forEach((src, i) => {
      const dst = this.cache.buffers[i];
      for (let r = r0; r < r1; r++)
        for (let h = 0; h < heads; h++) {
          const from = (((r - r0) * heads + h) * columns + columns - 1) * D;
          dst.set(src.subarray(from, from + D), ((r * heads + h) * cap + lengths[r]) * D);
        }
    });
  }
}
