// Layout "gqa": graphs whose attention is com.microsoft GroupQueryAttention (the onnxruntime-genai
// model builder's exports). The op takes seqlens_k = sum(attention_mask) - 1 per row (the graph
// derives it), computes positions from it, and writes the fed token's keys/values at column
// length_r of its present. Rows are left-aligned in one [rows, kv_heads, capacity, head_dim]
// buffer per entry, fed as the past. A pass fetches only each row's new column (the graph's
// new-column outputs, a GatherElements at seqlens_k: ../last-token-outputs.ts), copied to column
// length_r here; the present stays in onnxruntime's arena, where the op copies each row's past
// into it.
//
// Before, the buffer was both the past input and the present output, so that the op worked in
// place; but onnxruntime-node (1.30) hands back every fetched output as a new JavaScript buffer,
// so each pass also copied the whole capacity of every row into fresh memory for the garbage
// collector. On the 134M bench model (GroupQueryAttention export), 8 streams ran at 132–136 →
// 206 tokens/s in fp32 and 155–164 → 279–295 in q4 (docs/api.md, "Graph layouts"). A graph
// without the outputs (opset < 11, or nodes that disagree on seqlens_k) is still served the
// shared way.
//
// The buffers keep spare room (./kv-rows.ts): a membership change copies in the joiners' prompts
// and moves only rows whose slot changes; a capacity change re-strides in place.
import type { DecodeBatch } from "./layout";
import { RowsBatch } from "./rows-batch";
import { int64View, kvTensor, type OrtTensor } from "../session";

/** Row ranges run in one pass: all rows, or one row each when rows interact within a pass. */
function passRanges(rows: number, oneEach: boolean): [number, number][] {
  if (rows === 0) return [];
  return oneEach ? Array.from({ length: rows }, (_, r) => [r, r + 1]) : [[0, rows]];
}

export class GqaBatch extends RowsBatch implements DecodeBatch {
  async step(tokens: readonly number[]): Promise<Float32Array[]> {
    const { kv } = this.io.sig;
    // The op needs total_sequence_length (the mask's width, longest + 1) <= capacity.
    const longest = Math.max(...this.cache.lengths);
    if (longest + 1 > this.cache.stride) this.cache.resize(this.capacity(longest));
    const cap = this.cache.stride;
    const lengths = this.cache.lengths;
    const per = this.io.rowSize * cap;
    const out: Float32Array[] = [];
    for (const [r0, r1] of passRanges(this.size, this.io.sig.rowsInteract || this.io.sig.batchOfOne)) {
      const g = r1 - r0;
      const passLengths = lengths.slice(r0, r1);
      const width = Math.max(...passLengths) + 1;
      const mask = new BigInt64Array(g * width);
      passLengths.forEach((len, i) => mask.fill(1n, i * width, i * width + len + 1));
      const views = this.cache.buffers.map((b) => b.subarray(r0 * per, r1 * per));
      const dims = [g, kv.heads, cap, kv.headDim];
      const logits = this.logitsFor(r0, r1);
      const states = this.states?.io(r0, r1);
      const fetches: Record<string, OrtTensor | null> = { logits: logits.tensor, ...states?.fetches };
      const columnDims = [g, kv.heads, 1, kv.headDim];
      const columns = this.sliced ? this.fetchBuffers(g * this.io.rowSize, this.io.rowSize) : [];
      kv.entries.forEach((e, i) =>
        this.sliced
          ? (fetches[e.lastToken!] = kvTensor(kv.type, columns[i], columnDims))
          : (fetches[e.present] = kvTensor(kv.type, views[i], dims)),
      );
      await this.io.session.run(
        {
          ...states?.feeds,
          ...this.io.inputs(tokens.slice(r0, r1), g, 1, () => passLengths, true),
          attention_mask: int64View(mask, [g, width]),
          ...this.io.past(views, dims),
        },
        fetches,
      );
      // Each row's new column (written at column length_r of the present) → column length_r here.
      if (this.sliced) this.cache.storeNewColumns(columns, r0, r1, 1);
      out.push(...this.io.lastLogits(logits.tensor, g, logits.rows));
    }
    this.states?.advance();
    for (let r = 0; r < this.size; r++) lengths[r]++;
    return out;
  }
}
