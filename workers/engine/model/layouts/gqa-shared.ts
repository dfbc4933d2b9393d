// Layout "gqa-shared": graphs whose attention is com.microsoft GroupQueryAttention (the
// onnxruntime-genai model builder's exports). The op takes seqlens_k = sum(attention_mask) - 1
// per row (the graph derives it), computes positions from it, and writes the fed token's
// keys/values at column length_r itself. Rows are left-aligned in one [rows, kv_heads,
// capacity, head_dim] buffer per entry that is both the past input and the present output
// (the same memory: the op then works in place), so a decode step copies no cache at all.
import type { DecodeBatch, PrefillState } from "./layout";
import { copyRow, kvData, type GraphIo } from "./feeds";
import { int64View, kvTensor, newKvArray, type KvArray, type OrtTensor } from "../session";

/** Row ranges run in one pass: all rows, or one row each when rows interact within a pass. */
function passRanges(rows: number, oneEach: boolean): [number, number][] {
  if (rows === 0) return [];
  return oneEach ? Array.from({ length: rows }, (_, r) => [r, r + 1]) : [[0, rows]];
}

/**
 * The op reads only each row's own columns, so spare capacity costs memory, not time: grow by
 * 64 columns or a quarter, whichever is more, to copy the cache rarely.
 */
const capacityFor = (longest: number) => Math.ceil(Math.max(longest + 64, longest * 1.25) / 64) * 64;

export class GqaSharedBatch implements DecodeBatch {
  private buffers: KvArray[] = [];
  private lengths: number[] = [];
  private cap = 0;
  private logits = new Map<number, ReturnType<GraphIo["logitsOutput"]>>();

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
    const { kv } = this.io.sig;
    const lengths = [...keep.map((r) => this.lengths[r]), ...joiners.map((j) => j.length)];
    const cap = capacityFor(Math.max(0, ...lengths));
    this.buffers = kv.entries.map((_, e) => {
      const dst = newKvArray(kv.type, lengths.length * this.io.rowSize * cap);
      keep.forEach((r, to) => copyRow(this.buffers[e], r, this.cap, dst, to, cap, lengths[to], kv.heads, kv.headDim));
      joiners.forEach((j, i) =>
        copyRow(kvData(j.presents[e]), 0, j.length, dst, keep.length + i, cap, j.length, kv.heads, kv.headDim),
      );
      return dst;
    });
    this.lengths = lengths;
    this.cap = cap;
  }

  async step(tokens: readonly number[]): Promise<Float32Array[]> {
    const { kv } = this.io.sig;
    // The op needs total_sequence_length (the mask's width, longest + 1) <= capacity.
    if (Math.max(...this.lengths) + 1 > this.cap) this.reshape([...this.lengths.keys()], []);
    const cap = this.cap;
    const per = this.io.rowSize * cap;
    const out: Float32Array[] = [];
    for (const [r0, r1] of passRanges(this.size, this.io.sig.rowsInteract || this.io.sig.batchOfOne)) {
      const g = r1 - r0;
      const lengths = this.lengths.slice(r0, r1);
      const width = Math.max(...lengths) + 1;
      const mask = new BigInt64Array(g * width);
      lengths.forEach((len, i) => mask.fill(1n, i * width, i * width + len + 1));
      const views = this.buffers.map((b) => b.subarray(r0 * per, r1 * per));
      const dims = [g, kv.heads, cap, kv.headDim];
      let logits = this.logits.get(g);
      if (!logits) this.logits.set(g, (logits = this.io.logitsOutput(g)));
      const fetches: Record<string, OrtTensor | null> = { logits: logits.tensor };
      kv.entries.forEach((e, i) => (fetches[e.present] = kvTensor(kv.type, views[i], dims)));
      await this.io.session.run(
        {
          ...this.io.inputs(tokens.slice(r0, r1), g, 1, () => lengths, true),
          attention_mask: int64View(mask, [g, width]),
          ...this.io.past(views, dims),
        },
        fetches,
      );
      out.push(...this.io.lastLogits(logits.tensor, g, logits.rows));
    }
    for (let r = 0; r < this.size; r++) this.lengths[r]++;
    return out;
  }
}
