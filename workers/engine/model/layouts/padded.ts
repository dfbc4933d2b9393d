// Layout "padded": graphs that take position_ids (Optimum exports, MultiHeadAttention graphs).
// One buffer per cache entry, [rows, heads, capacity, head_dim]: row r's tokens sit in columns
// [0, length_r), the columns after it are masked out by attention_mask, and positions are fed
// explicitly, so rows of any lengths share a pass. The graph appends the fed token at column
// `capacity` of `present` (written into a preallocated scratch, not copied out of onnxruntime);
// that one column is then copied to column length_r. Rows move only when membership changes or
// the capacity grows.
import type { DecodeBatch, PrefillState } from "./layout";
import { copyRow, kvData, type GraphIo } from "./feeds";
import { int64View, kvTensor, newKvArray, type KvArray, type OrtTensor } from "../session";

/**
 * Every padded column costs each step (the graph concatenates, transposes and attends over the
 * whole past): measured on the 134M bench model's q4 graph, a pass over 128 columns of past took
 * 35% longer than over 20. A full cache is rebuilt instead, every 16 steps at first, then every
 * longest/8: about 8 padded columns on short sequences, at most 1/16 of the past on long ones.
 */
export const capacityFor = (longest: number) => longest + Math.max(16, Math.ceil(longest / 8));

interface Scratch {
  presents: KvArray[];
  presentTensors: OrtTensor[];
  logits: ReturnType<GraphIo["logitsOutput"]>;
}

export class PaddedBatch implements DecodeBatch {
  private buffers: KvArray[] = [];
  private lengths: number[] = [];
  private cap = 0;
  /** attention_mask, [rows, cap + 1]: 1 on each row's tokens and on the fed token's column. */
  private mask = new BigInt64Array(0);
  /** present outputs and logits for the current row count and capacity, reused step after step. */
  private scratch = new Map<number, Scratch>();
  /** Bytes of cache copied by membership and capacity changes so far. */
  moved = 0;

  constructor(private readonly io: GraphIo) {}

  get size() {
    return this.lengths.length;
  }
  get bytes() {
    return this.buffers.reduce((a, b) => a + b.byteLength, 0);
  }
  get columns() {
    return this.cap;
  }

  reshape(keep: readonly number[], joiners: readonly PrefillState[]) {
    const lengths = [...keep.map((r) => this.lengths[r]), ...joiners.map((j) => j.length)];
    this.rebuild(lengths, capacityFor(Math.max(0, ...lengths)), (dst, e, toRow, cap) => {
      const { heads, headDim } = this.io.sig.kv;
      if (toRow < keep.length)
        copyRow(this.buffers[e], keep[toRow], this.cap, dst, toRow, cap, lengths[toRow], heads, headDim);
      else {
        const j = joiners[toRow - keep.length];
        copyRow(kvData(j.presents[e]), 0, j.length, dst, toRow, cap, j.length, heads, headDim);
      }
    });
  }

  private rebuild(
    lengths: number[],
    cap: number,
    fill: (dst: KvArray, entry: number, row: number, cap: number) => void,
  ) {
    const { kv } = this.io.sig;
    const B = lengths.length;
    this.buffers = kv.entries.map((_, e) => {
      const dst = newKvArray(kv.type, B * this.io.rowSize * cap);
      for (let r = 0; r < B; r++) fill(dst, e, r, cap);
      return dst;
    });
    this.moved += lengths.reduce((a, len) => a + len, 0) * this.io.rowSize * kv.entries.length * elementBytes(kv.type);
    this.lengths = lengths;
    this.cap = cap;
    this.mask = new BigInt64Array(B * (cap + 1));
    lengths.forEach((len, r) => {
      this.mask.fill(1n, r * (cap + 1), r * (cap + 1) + len);
      this.mask[r * (cap + 1) + cap] = 1n;
    });
    this.scratch.clear();
  }

  async step(tokens: readonly number[]): Promise<Float32Array[]> {
    const { kv } = this.io.sig;
    const longest = Math.max(...this.lengths);
    if (longest >= this.cap) {
      // Full: move every row into a larger buffer (the new token goes to column length_r).
      const old = this.buffers;
      const oldCap = this.cap;
      this.rebuild([...this.lengths], capacityFor(longest), (dst, e, r, cap) =>
        copyRow(old[e], r, oldCap, dst, r, cap, this.lengths[r], kv.heads, kv.headDim),
      );
    }
    const cap = this.cap;
    const D = kv.headDim;
    const B = this.size;
    const s = this.scratchFor(B);
    const feeds = {
      ...this.io.inputs(tokens, B, 1, () => this.lengths, true),
      attention_mask: int64View(this.mask, [B, cap + 1]),
      ...this.io.past(this.buffers, [B, kv.heads, cap, D]),
    };
    const fetches: Record<string, OrtTensor | null> = { logits: s.logits.tensor };
    kv.entries.forEach((e, i) => (fetches[e.present] = s.presentTensors[i]));
    await this.io.session.run(feeds, fetches);
    // The fed token's keys/values: column `cap` of present → column length_r of the cache.
    kv.entries.forEach((_, i) => {
      const src = s.presents[i];
      const dst = this.buffers[i];
      for (let r = 0; r < B; r++) {
        for (let h = 0; h < kv.heads; h++) {
          const from = ((r * kv.heads + h) * (cap + 1) + cap) * D;
          dst.set(src.subarray(from, from + D), ((r * kv.heads + h) * cap + this.lengths[r]) * D);
        }
      }
    });
    for (let r = 0; r < B; r++) this.mask[r * (cap + 1) + this.lengths[r]++] = 1n;
    return this.io.lastLogits(s.logits.tensor, B, s.logits.rows);
  }

  private scratchFor(g: number): Scratch {
    let s = this.scratch.get(g);
    if (!s) {
      const { kv } = this.io.sig;
      const dims = [g, kv.heads, this.cap + 1, kv.headDim];
      const presents = kv.entries.map(() => newKvArray(kv.type, g * this.io.rowSize * (this.cap + 1)));
      s = {
        presents,
        presentTensors: presents.map((p) => kvTensor(kv.type, p, dims)),
        logits: this.io.logitsOutput(g),
      };
      this.scratch.set(g, s);
    }
    return s;
  }
}

const elementBytes = (type: "float32" | "float16") => (type === "float32" ? 4 : 2);
