// Layout "padded": graphs that take position_ids (Optimum exports, MultiHeadAttention graphs,
// hybrid models: a recurrent state only ever takes each row's fed token, never padding).
// One buffer per cache entry, [rows, heads, capacity, head_dim]: row r's tokens sit in columns
// [0, length_r), the columns after it are masked out by attention_mask, and positions are fed
// explicitly, so rows of any lengths share a pass. The graph appends the fed token at column
// `capacity` of `present`; that one column is fetched alone (../last-token-outputs.ts) and
// copied to column length_r.
//
// The buffers (cache and scratch) keep spare room and are fed as views of their first rows
// (./kv-rows.ts): a row joining copies in its prompt's cache and nothing else, a row leaving
// from the end moves nothing, a row leaving from the middle has the last row moved into its slot
// (the scheduler orders rows so), and a capacity change re-strides in place. Before, every
// join and leave allocated and filled a whole new cache and scratch: on the fairness bench (one
// team's 16 rows, another's one row joining and leaving) the engine spent 199 s of 968 s
// rebuilding caches (72 GB copied, machine loaded); now 0.8 s of 116 s (4 GB, nearly all of it
// capacity growth, which the flood alone does as well).
import type { DecodeBatch, PrefillState } from "./layout";
import { RowsBatch } from "./rows-batch";
import { int64View, kvTensor, type OrtTensor } from "../session";

export class PaddedBatch extends RowsBatch implements DecodeBatch {
  /** attention_mask, [rows, cap + 1]: 1 on each row's tokens and on the fed token's column. */
  private mask = new BigInt64Array(0);

  reshape(keep: readonly number[], joiners: readonly PrefillState[]) {
    super.reshape(keep, joiners);
    this.fillMask();
  }

  private fillMask() {
    const cap = this.cache.stride;
    const lengths = this.cache.lengths;
    this.mask = new BigInt64Array(lengths.length * (cap + 1));
    lengths.forEach((len, r) => {
      this.mask.fill(1n, r * (cap + 1), r * (cap + 1) + len);
      this.mask[r * (cap + 1) + cap] = 1n;
    });
  }

  async step(tokens: readonly number[]): Promise<Float32Array[]> {
    const { kv } = this.io.sig;
    const longest = Math.max(...this.cache.lengths);
    if (longest >= this.cache.stride) {
      // Full: re-stride every row to the larger capacity (the new token goes to column length_r).
      this.cache.resize(this.capacity(longest));
      this.fillMask();
    }
    const lengths = this.cache.lengths; // (resize replaces the array)
    const cap = this.cache.stride;
    const D = kv.headDim;
    const B = this.size;
    // With the graph's last-token outputs, only the fed token's column comes back ([B, heads, 1, D]);
    // otherwise the whole present ([B, heads, cap + 1, D]), whose column `cap` is the fed token's.
    const columns = this.sliced ? 1 : cap + 1;
    const outDims = [B, kv.heads, columns, D];
    const outLength = B * this.io.rowSize * columns;
    const presents = this.fetchBuffers(outLength, this.io.rowSize * columns);
    const logits = this.logitsFor(0, B);
    const states = this.states?.io();
    const feeds = {
      ...states?.feeds,
      ...this.io.inputs(tokens, B, 1, () => lengths, true),
      attention_mask: int64View(this.mask, [B, cap + 1]),
      ...this.io.past(
        kv.entries.map((_, e) => this.cache.view(e)),
        [B, kv.heads, cap, D],
      ),
    };
    const fetches: Record<string, OrtTensor | null> = { logits: logits.tensor, ...states?.fetches };
    kv.entries.forEach(
      (e, i) => (fetches[this.sliced ? e.lastToken! : e.present] = kvTensor(kv.type, presents[i], outDims)),
    );
    await this.io.session.run(feeds, fetches);
    this.states?.advance();
    // The fed token's keys/values (last column of what came back) → column length_r of the cache.
    this.cache.storeNewColumns(presents, 0, B, columns);
    for (let r = 0; r < B; r++) this.mask[r * (cap + 1) + lengths[r]++] = 1n;
    return this.io.lastLogits(logits.tensor, B, logits.rows);
  }
}
