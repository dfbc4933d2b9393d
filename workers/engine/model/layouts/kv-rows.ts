// Left-aligned cache rows, one buffer per cache entry laid out [rows, heads, stride, head_dim]:
// row r's tokens sit in columns [0, length_r) of its block. The buffers are allocated with spare
// room (rows and columns together), and the graph is fed a view of the first `size` rows, so:
//  - a membership change moves only the rows whose slot changes (the scheduler fills a leaving
//    row's slot with a row from the end, so a row leaving from the end or a row joining at the
//    end moves no other row) and copies each joiner's prompt cache in once;
//  - a capacity change re-strides the rows in place (one memmove per row and head);
//  - memory is allocated again only when the room runs out, and then with headroom, so membership
//    changes stop allocating and zero-filling a whole cache each time;
//  - room more than 4× what the rows need is given back only once it has stayed that large for
//    KV_SHRINK_AFTER_MS: a batch that empties and fills again (requests one after another, a
//    burst that ends and starts again) keeps its buffers instead of growing new ones from
//    scratch. New memory is the dear part of growing: each fresh page is faulted in and zeroed
//    (measured here: 123 MB of new buffers, 8 rows of the 134M bench model at 139 columns,
//    took 360 ms to touch, against 5 ms to copy the rows into them).
//  - the headroom stays within the owner's limit (the scheduler's KV cache budget, less what the
//    prompt cache holds of its idle room: BatchLimit), and always has room up to what the rows
//    will come to need, their spans (prompt + max_tokens, PrefillState.span; the longest for all,
//    as the budget counts them). So the buffers stay within the budget that admitted the rows.
//    Before, the headroom (and capacityFor's columns) took them up to 1.5× past it.
// Columns past a row's length hold stale (finite) keys and values; the graphs mask them out.
import type { PrefillState } from "./layout";
import { copyRow, kvData, restrideBlocks } from "./feeds";
import { newKvArray, type KvArray } from "../session";

export interface KvShape {
  type: "float32" | "float16";
  entries: number;
  heads: number;
  headDim: number;
}

/**
 * Elements to allocate for `need`: half as much again (room for a capacity growth or two and
 * for rows joining), and at least two more rows of `rowElems`.
 */
export const withHeadroom = (need: number, rowElems: number) => Math.ceil(Math.max(need * 1.5, need + 2 * rowElems));

/** How long room more than 4× the need is kept before it is given back (see above). */
export const KV_SHRINK_AFTER_MS = 30_000;

export class KvRows {
  buffers: KvArray[] = [];
  lengths: number[] = [];
  /** Each row's span (PrefillState.span; Infinity where not given). */
  spans: number[] = [];
  /** Columns per row: the capacity the graph sees. */
  stride = 0;
  /** Bytes of cache copied by reshapes and re-strides so far (joiners' prompt caches included). */
  moved = 0;
  /** Buffer allocations so far. */
  allocations = 0;

  /** Since when (performance.now()) the room has been more than 4× the need; null while it is not. */
  private oversizedSince: number | null = null;

  /**
   * @param limit the elements of one buffer that an allocation's headroom may reach (see above),
   *   read at each allocation, at the stride it allocates for.
   */
  constructor(
    private readonly shape: KvShape,
    private readonly shrinkAfterMs = KV_SHRINK_AFTER_MS,
    private readonly limit: (stride: number) => number = () => Infinity,
  ) {}

  get size() {
    return this.lengths.length;
  }
  get bytes() {
    return this.buffers.reduce((a, b) => a + b.byteLength, 0);
  }
  /** The longest span of the rows: no row's cache grows past it. */
  get maxSpan() {
    return Math.max(0, ...this.spans);
  }
  /** Bytes of one element of every buffer together (`limit` is in elements of one buffer). */
  get elementBytes() {
    return this.shape.entries * this.elemBytes;
  }
  private get rowSize() {
    return this.shape.heads * this.shape.headDim;
  }
  private get elemBytes() {
    return this.shape.type === "float32" ? 4 : 2;
  }
  private get capacity() {
    return this.buffers[0]?.length ?? 0;
  }

  /** Entry e's first `size` rows at the current stride, as the graph takes them. */
  view(e: number): KvArray {
    return this.buffers[e].subarray(0, this.size * this.rowSize * this.stride);
  }

  /**
   * New membership: current rows `keep` (in that order), then one row per joiner, at `stride`
   * columns per row (each row's length must fit in it). In place when the room allows.
   */
  reshape(keep: readonly number[], joiners: readonly PrefillState[], stride: number) {
    const lengths = [...keep.map((r) => this.lengths[r]), ...joiners.map((j) => j.length)];
    const spans = [...keep.map((r) => this.spans[r]), ...joiners.map((j) => j.span ?? Infinity)];
    const need = lengths.length * this.rowSize * stride;
    const rowElems = this.rowSize * stride;
    const now = performance.now();
    const oversized = this.capacity > 4 * withHeadroom(need, rowElems);
    if (!oversized) this.oversizedSince = null;
    else this.oversizedSince ??= now;
    if (need > this.capacity || (oversized && now - this.oversizedSince! >= this.shrinkAfterMs)) {
      this.oversizedSince = null;
      // New buffers: copy the kept rows straight to their new slots and stride.
      const old = this.buffers;
      const oldStride = this.stride;
      const oldLengths = this.lengths;
      // Headroom within the limit, or up to the rows' spans (the longest for all: the budget counted them so).
      const spanned = lengths.length * this.rowSize * Math.max(stride, ...spans);
      const alloc = Math.max(
        need,
        Math.min(withHeadroom(need, rowElems), Math.max(spanned, Math.floor(this.limit(stride)))),
      );
      this.buffers = Array.from({ length: this.shape.entries }, () => newKvArray(this.shape.type, alloc));
      this.allocations++;
      keep.forEach((from, to) => {
        for (let e = 0; e < old.length; e++)
          this.copyColumns(old[e], from, oldStride, this.buffers[e], to, stride, oldLengths[from]);
      });
    } else {
      this.moveRows(keep);
      this.lengths = keep.map((r) => this.lengths[r]);
      this.spans = keep.map((r) => this.spans[r]);
      this.restride(stride);
    }
    joiners.forEach((j, i) => {
      for (let e = 0; e < this.buffers.length; e++)
        this.copyColumns(kvData(j.presents[e]), 0, j.length, this.buffers[e], keep.length + i, stride, j.length);
    });
    this.lengths = lengths;
    this.spans = spans;
    this.stride = stride;
  }

  /**
   * Rows r0..r1-1's new keys/values, the last column of `fetched` ([r1 - r0, heads, columns, D]
   * per entry), to column length_r of their rows (lengths are the caller's to advance).
   */
  storeNewColumns(fetched: readonly KvArray[], r0: number, r1: number, columns: number) {
    const { heads, headDim: D } = this.shape;
    fetched.forEach((src, i) => {
      const dst = this.buffers[i];
      for (let r = r0; r < r1; r++)
        for (let h = 0; h < heads; h++) {
          const from = (((r - r0) * heads + h) * columns + columns - 1) * D;
          dst.set(src.subarray(from, from + D), ((r * heads + h) * this.stride + this.lengths[r]) * D);
        }
    });
  }

  /** A copy of row `row`'s columns from `from` on: [1, heads, length - from, head_dim] per entry. */
  extract(row: number, from = 0): { buffers: KvArray[]; length: number } {
    const { heads, headDim: D } = this.shape;
    const length = this.lengths[row] - from;
    const buffers = this.buffers.map((src) => {
      const dst = newKvArray(this.shape.type, heads * length * D);
      for (let h = 0; h < heads; h++) {
        const at = ((row * heads + h) * this.stride + from) * D;
        dst.set(src.subarray(at, at + length * D), h * length * D);
      }
      return dst;
    });
    return { buffers, length };
  }

  /** Changes the stride of the current rows, in place when the room allows. */
  resize(stride: number) {
    if (stride === this.stride) return;
    this.reshape([...this.lengths.keys()], [], stride);
  }

  /** Rows `keep` to slots 0..keep.length-1 at the current stride; a kept row in its slot stays. */
  private moveRows(keep: readonly number[]) {
    const block = this.rowSize * this.stride;
    const moves = keep.map((from, to) => ({ from, to })).filter((m) => m.from !== m.to);
    if (moves.length === 0) return;
    // Each row moving to a lower slot: in ascending order no source is overwritten before it is read.
    const forward = moves.every((m) => m.from > m.to);
    for (const buf of this.buffers) {
      const staged = forward ? [] : moves.map((m) => buf.slice(m.from * block, (m.from + 1) * block));
      moves.forEach((m, i) => {
        if (forward) buf.copyWithin(m.to * block, m.from * block, (m.from + 1) * block);
        else buf.set(staged[i], m.to * block);
      });
    }
    this.moved += moves.length * block * this.buffers.length * this.elemBytes;
  }

  /** The current rows from the current stride to `stride`, in place (the room must suffice). */
  private restride(stride: number) {
    const old = this.stride;
    if (stride === old || this.size === 0) {
      this.stride = stride;
      return;
    }
    const { heads, headDim: D } = this.shape;
    for (const buf of this.buffers)
      restrideBlocks(buf, this.size * heads, D, old, stride, (b) => this.lengths[Math.floor(b / heads)]);
    this.moved += this.lengths.reduce((a, len) => a + len, 0) * heads * D * this.buffers.length * this.elemBytes;
    this.stride = stride;
  }

  /** `length` columns of row `row` of a [*, heads, fromStride, D] cache to row `toRow` here. */
  private copyColumns(
    src: KvArray,
    row: number,
    fromStride: number,
    dst: KvArray,
    toRow: number,
    toStride: number,
    length: number,
  ) {
    const { heads, headDim: D } = this.shape;
    copyRow(src, row, fromStride, dst, toRow, toStride, length, heads, D);
    this.moved += heads * length * D * this.elemBytes;
  }
}
