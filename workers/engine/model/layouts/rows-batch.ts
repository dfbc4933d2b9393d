// What the layouts whose rows live in one KvRows cache (padded, gqa) share: the figures a
// DecodeBatch reports, the capacity rule, the buffers a pass fetches into, and a hybrid model's
// recurrent states (./state-rows.ts), which move with their rows.
import type { GraphIo } from "./feeds";
import type { BatchLimit, PrefillState } from "./layout";
import { KvRows, withHeadroom } from "./kv-rows";
import { kvTensor, newKvArray, type KvArray } from "../session";
import { StateRows } from "./state-rows";

/**
 * Every spare column costs each step. In the padded layout the graph concatenates, transposes and
 * attends over the whole past: measured on the 134M bench model's q4 graph, a pass over 128
 * columns of past took 35% longer than over 20. In the gqa layout onnxruntime allocates and fills
 * a present of the whole capacity: 8 rows at 100 tokens took 44 ms at 128 columns and 66 ms at 768
 * (loaded machine), and this rule gave 8 streams 3–5% more tokens/s than the 64-column steps gqa
 * grew by before. The capacity grows when full, by 16 columns at first, then by longest/8: about
 * 8 spare columns on short sequences, at most 1/16 of the past on long ones. A membership change
 * keeps the capacity unless it exceeds what capacityFor(longest) would give.
 */
export const capacityFor = (longest: number) => {
  const capacity = longest + Math.max(16, Math.ceil(longest / 8));
  // Even: a one-token pass over an even past can skip the cache's Concat (../split-attention.ts).
  return capacity + (capacity % 2);
};

export abstract class RowsBatch {
  protected readonly cache: KvRows;
  /** The rows' recurrent states, in row order (graphs with states only). */
  protected readonly states: StateRows | null;
  /** Whether the graph has its new-column outputs (../last-token-outputs.ts): then only those are fetched. */
  protected readonly sliced: boolean;
  /** What passes fetch per cache entry (see fetchBuffers). */
  private fetched: KvArray[] = [];
  /** The logits passes fetch into (see logitsFor), and how many rows it holds. */
  private logits: ReturnType<GraphIo["logitsOutput"]> | null = null;
  private logitsRows = 0;

  /** @param limit the bytes the batch's buffers may hold with their headroom (BatchLimit). */
  constructor(
    protected readonly io: GraphIo,
    limit: BatchLimit = () => Infinity,
  ) {
    const { kv } = io.sig;
    this.cache = new KvRows(
      { type: kv.type, entries: kv.entries.length, heads: kv.heads, headDim: kv.headDim },
      undefined,
      // As many rows as the limit holds at the stride, each with its states.
      (stride) => {
        const row = this.io.rowSize * stride;
        return (limit() / (row * this.cache.elementBytes + (this.states?.rowBytes ?? 0))) * row;
      },
    );
    this.sliced = io.sliced;
    this.states = io.sig.states.length ? new StateRows(io.sig.states) : null;
  }

  get size() {
    return this.cache.size;
  }

  /**
   * A [r1 - r0, 1, V] logits output for rows [r0, r1) of a step, over one buffer kept for the most
   * rows seen: each row has its own place, so a step run in several passes (one row each, when
   * rows interact) hands back each row's logits. Before, the gqa layout's passes of one row all
   * fetched into the same one-row buffer, and every row was sampled from the last row's logits.
   */
  protected logitsFor(r0: number, r1: number): ReturnType<GraphIo["logitsOutput"]> {
    const rows = Math.max(r1, this.size);
    if (!this.logits || this.logitsRows < rows) {
      this.logitsRows = Math.max(rows, Math.ceil(rows * 1.5));
      this.logits = this.io.logitsOutput(this.logitsRows);
    }
    const V = this.io.vocabSize;
    const { tensor, rows: widened } = this.logits;
    const type = tensor.type === "float16" ? "float16" : "float32";
    return {
      tensor: kvTensor(type, (tensor.data as KvArray).subarray(r0 * V, r1 * V), [r1 - r0, 1, V]),
      rows: widened.slice(r0, r1),
    };
  }
  get bytes() {
    return this.cache.bytes + (this.states?.bytes ?? 0);
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
   * New membership (DecodeBatch.reshape), keeping the capacity while the longest row has room for
   * its next token and the capacity is no more than capacity(longest).
   */
  reshape(keep: readonly number[], joiners: readonly PrefillState[]) {
    const longest = Math.max(0, ...keep.map((r) => this.cache.lengths[r]), ...joiners.map((j) => j.length));
    const span = Math.max(0, ...keep.map((r) => this.cache.spans[r]), ...joiners.map((j) => j.span ?? Infinity));
    const cap = this.cache.stride;
    const fits = this.capacity(longest, span);
    this.cache.reshape(keep, joiners, longest < cap && cap <= fits ? cap : fits);
    this.states?.reshape(keep, joiners);
  }

  /**
   * The capacity for a longest row of `longest` tokens: capacityFor(longest), but no more than
   * the rows' longest span (`span`; no row grows past it), and always room for the next token.
   */
  protected capacity(longest: number, span = this.cache.maxSpan): number {
    return Math.max(longest + 1, Math.min(capacityFor(longest), span));
  }

  /** DecodeBatch.extract. */
  extract(row: number, from = 0): PrefillState | null {
    return this.states ? null : kvState(this.io, this.cache.extract(row, from));
  }

  /**
   * The buffers a pass fetches into, `length` elements per entry, over buffers kept step after
   * step for the most seen (with headroom: `rowElems` is one row's share).
   */
  protected fetchBuffers(length: number, rowElems: number): KvArray[] {
    const { kv } = this.io.sig;
    if ((this.fetched[0]?.length ?? 0) < length)
      this.fetched = kv.entries.map(() => newKvArray(kv.type, withHeadroom(length, rowElems)));
    return this.fetched.map((b) => b.subarray(0, length));
  }
}

/** Extracted cache columns as a prefilled state: [1, heads, length, head_dim] per entry. */
export function kvState(io: GraphIo, { buffers, length }: { buffers: KvArray[]; length: number }): PrefillState {
  const { kv } = io.sig;
  return { presents: buffers.map((b) => kvTensor(kv.type, b, [1, kv.heads, length, kv.headDim])), length };
}
