// KV cache storage for continuous batching.
//
// A prefill keeps its request's cache as onnxruntime returns it ([1, heads, tokens, head_dim]).
// The running batch keeps one buffer per cache entry shaped [rows, heads, capacity, head_dim]:
// row r's tokens sit in columns [0, length_r); the columns after it are masked out by
// attention_mask. The model sees the whole buffer as its past; positions are passed explicitly,
// so the physical column of a token does not matter. After each decode step the new token's
// keys/values are written in place at column length_r: nothing is shifted or re-copied, and
// only the new tokens' keys/values (or, for graphs without such outputs, the last column of
// `present`) are read back. Rows are copied only when the batch's membership changes or the
// capacity grows.
import { Tensor } from "@huggingface/transformers";
import type { ForwardOutputs } from "./model-loader";
import type { KvLayout } from "./model-info";

/** Left-aligned cache rows in some buffers: row `row` holds `length` tokens, row stride `stride` columns. */
export interface RowSource {
  buffers: Float32Array[];
  stride: number;
  row: number;
  length: number;
}

const GROWTH = 64;

export class BatchCache {
  private constructor(
    private readonly layout: KvLayout,
    readonly buffers: Float32Array[],
    readonly capacity: number,
    readonly lengths: number[],
  ) {}

  static build(layout: KvLayout, sources: RowSource[], minCapacity = 0): BatchCache {
    const { heads: H, headDim: D } = layout;
    const longest = Math.max(0, ...sources.map((s) => s.length));
    const capacity = Math.max(minCapacity, longest + GROWTH);
    const buffers = layout.entries.map((_, e) => {
      const out = new Float32Array(sources.length * H * capacity * D);
      sources.forEach((s, r) => {
        for (let h = 0; h < H; h++) {
          const from = (s.row * H + h) * s.stride * D;
          out.set(s.buffers[e].subarray(from, from + s.length * D), (r * H + h) * capacity * D);
        }
      });
      return out;
    });
    return new BatchCache(
      layout,
      buffers,
      capacity,
      sources.map((s) => s.length),
    );
  }

  get rows() {
    return this.lengths.length;
  }

  get bytes() {
    return this.buffers.reduce((a, b) => a + b.byteLength, 0);
  }

  source(row: number): RowSource {
    return { buffers: this.buffers, stride: this.capacity, row, length: this.lengths[row] };
  }

  /** Full before the next step? Then the caller rebuilds with more capacity. */
  get full() {
    return this.lengths.some((l) => l >= this.capacity);
  }

  /** Past inputs and the mask for a one-token step: [rows, capacity + 1]. */
  stepInputs(): { past: Record<string, Tensor>; mask: number[] } {
    const { heads: H, headDim: D } = this.layout;
    const past = Object.fromEntries(
      this.layout.entries.map((e, i) => [
        e.past,
        new Tensor("float32", this.buffers[i], [this.rows, H, this.capacity, D]),
      ]),
    );
    const width = this.capacity + 1;
    const mask = new Array<number>(this.rows * width).fill(0);
    this.lengths.forEach((len, r) => {
      mask.fill(1, r * width, r * width + len);
      mask[r * width + this.capacity] = 1; // the token being fed
    });
    return { past, mask };
  }

  /** Output names to fetch after a step: logits plus the cheapest way to get the new keys/values. */
  fetchNames(): string[] {
    return ["logits", ...this.layout.entries.map((e) => e.delta ?? e.present)];
  }

  /** Stores each row's new token (from the step's outputs) at its next free column. */
  append(out: ForwardOutputs) {
    const { heads: H, headDim: D } = this.layout;
    this.layout.entries.forEach((e, i) => {
      const src = (e.delta ? out[e.delta] : out[e.present]).data;
      const srcCols = e.delta ? 1 : this.capacity + 1;
      const srcCol = e.delta ? 0 : this.capacity;
      const dst = this.buffers[i];
      this.lengths.forEach((len, r) => {
        for (let h = 0; h < H; h++) {
          const from = ((r * H + h) * srcCols + srcCol) * D;
          dst.set(src.subarray(from, from + D), ((r * H + h) * this.capacity + len) * D);
        }
      });
    });
    for (let r = 0; r < this.lengths.length; r++) this.lengths[r]++;
  }
}

/** A prefill's cache: the `present` outputs of its last chunk (one row). */
export interface PrefillCache {
  buffers: Float32Array[];
  length: number;
}

export function prefillPast(layout: KvLayout, cache: PrefillCache | null): Record<string, Tensor> {
  const { heads: H, headDim: D } = layout;
  return Object.fromEntries(
    layout.entries.map((e, i) => [
      e.past,
      new Tensor("float32", cache?.buffers[i] ?? new Float32Array(0), [1, H, cache?.length ?? 0, D]),
    ]),
  );
}

export function prefillCacheFrom(layout: KvLayout, out: ForwardOutputs): PrefillCache {
  const buffers = layout.entries.map((e) => out[e.present].data);
  return { buffers, length: out[layout.entries[0].present].dims[2] };
}
