// Inputs and outputs every layout shares: the graph's extra inputs, logits rows (float16 widened
// to float32 at this boundary), the prefill pass, and cache row copies.
import * as ort from "onnxruntime-node";
import { float16ToFloat32 } from "../float16";
import type { GraphSignature } from "../graph-signature";
import {
  boolTensor,
  int64Tensor,
  kvTensor,
  newKvArray,
  onesMask,
  type GraphSession,
  type KvArray,
  type OrtTensor,
} from "../session";
import type { PrefillState } from "./layout";
import { zeroStates } from "./state-rows";

export class GraphIo {
  readonly rowSize: number; // cache elements per token per entry (heads × head_dim)
  /**
   * Whether every cache entry has its new-column output (../last-token-outputs.ts): passes then
   * fetch only those, and prefill writes them into buffers sized for the whole prompt.
   */
  readonly sliced: boolean;
  private readonly keepLast = new ort.Tensor("int64", BigInt64Array.of(1n), []);

  constructor(
    readonly sig: GraphSignature,
    readonly session: GraphSession,
    readonly vocabSize: number,
  ) {
    this.rowSize = sig.kv.heads * sig.kv.headDim;
    this.sliced = sig.kv.entries.every((e) => e.lastToken);
  }

  /**
   * Inputs besides the cache and the mask: ids [B, S], positions [B, S] when the graph takes
   * them, num_logits_to_keep = 1 (only the last position's logits are computed), and
   * use_cache_branch = whether a past is given (merged decoders).
   */
  inputs(ids: ArrayLike<number>, B: number, S: number, positions: () => ArrayLike<number>, hasPast: boolean) {
    const feeds: Record<string, OrtTensor> = { input_ids: int64Tensor(ids, [B, S]) };
    if (this.sig.positionIds) feeds.position_ids = int64Tensor(positions(), [B, S]);
    if (this.sig.numLogitsToKeep) feeds.num_logits_to_keep = this.keepLast;
    if (this.sig.useCacheBranch) feeds.use_cache_branch = boolTensor(hasPast);
    return feeds;
  }

  past(data: KvArray[] | OrtTensor[], dims: number[]): Record<string, OrtTensor> {
    const feeds: Record<string, OrtTensor> = {};
    this.sig.kv.entries.forEach((e, i) => {
      const d = data[i];
      feeds[e.past] = d instanceof ort.Tensor ? d : kvTensor(this.sig.kv.type, d as KvArray, dims);
    });
    return feeds;
  }

  /** The last position's logits of each of B rows of a [B, S, V] output, as float32. */
  lastLogits(out: OrtTensor, B: number, into?: Float32Array[]): Float32Array[] {
    const [, S, V] = out.dims;
    const rows: Float32Array[] = [];
    for (let b = 0; b < B; b++) {
      const from = (b * S + S - 1) * V;
      if (out.type === "float32") rows.push((out.data as Float32Array).subarray(from, from + V));
      else
        rows.push(
          float16ToFloat32((out.data as Uint16Array).subarray(from, from + V), into?.[b] ?? new Float32Array(V)),
        );
    }
    return rows;
  }

  /** A preallocated [B, 1, V] logits output, with float32 rows to widen float16 into. */
  logitsOutput(B: number): { tensor: OrtTensor; rows: Float32Array[] } {
    const V = this.vocabSize;
    const half = this.sig.logitsType === "float16";
    const tensor = half
      ? new ort.Tensor("float16", new Uint16Array(B * V), [B, 1, V])
      : new ort.Tensor("float32", new Float32Array(B * V), [B, 1, V]);
    return { tensor, rows: half ? Array.from({ length: B }, () => new Float32Array(V)) : [] };
  }

  /**
   * Runs prompt tokens [start, end) of one sequence on top of `state`. A graph with new-column
   * outputs (model/last-token-outputs.ts) hands back only the chunk's columns: they go into
   * buffers sized for the whole prompt, its cache so far re-strided in place, where fetching the
   * presents copied the whole cache into new buffers after every chunk (a 2,048-token prompt in
   * 128-token chunks: 17,408 columns instead of 2,048).
   */
  async prefill(state: PrefillState | null, ids: readonly number[], start: number, end: number) {
    const { kv } = this.sig;
    const S = end - start;
    const D = kv.headDim;
    const feeds: Record<string, OrtTensor> = {
      ...this.inputs(ids.slice(start, end), 1, S, () => Array.from({ length: S }, (_, i) => start + i), start > 0),
      attention_mask: onesMask(1, end),
      ...this.past(state?.presents ?? kv.entries.map(() => newKvArray(kv.type, 0)), [1, kv.heads, start, D]),
    };
    const fetches: Record<string, OrtTensor | null> = { logits: null };
    for (const e of kv.entries) fetches[this.sliced ? e.lastToken! : e.present] = null;
    const stateBefore = state?.states ?? zeroStates(this.sig.states);
    this.sig.states.forEach((s, i) => {
      feeds[s.past] = kvTensor(s.type, stateBefore[i], [1, ...s.dims]);
      fetches[s.present] = null;
    });
    const out = await this.session.run(feeds, fetches);
    const logits = this.lastLogits(out.logits, 1)[0];
    const states = this.sig.states.length ? this.sig.states.map((s) => kvData(out[s.present])) : undefined;
    if (!this.sliced)
      return { state: { presents: kv.entries.map((e) => out[e.present]), length: end, states }, logits };
    const buffers = state?.buffers ?? kv.entries.map(() => newKvArray(kv.type, kv.heads * ids.length * D));
    const presents = kv.entries.map((e, i) => {
      const buf = buffers[i];
      restrideBlocks(buf, kv.heads, D, start, end, start);
      copyRow(kvData(out[e.lastToken!]), 0, S, buf, 0, end, S, kv.heads, D, start);
      return kvTensor(kv.type, buf.subarray(0, kv.heads * end * D), [1, kv.heads, end, D]);
    });
    return { state: { presents, length: end, buffers, states }, logits };
  }

  /**
   * The first `length` columns of a prefilled cache, copied into buffers of their own (sized for
   * `promptLength` tokens where prefill writes chunks in place), as prefill leaves them after a
   * chunk ending at `length`. The cache may come in parts, one after another (a kept answer's
   * columns after its prompt's). Only for graphs without recurrent states, whose kept states are
   * the prompt's last and not its beginning's.
   */
  prefix(parts: readonly PrefillState[], length: number, promptLength: number): PrefillState {
    const { kv } = this.sig;
    const available = parts.reduce((a, p) => a + p.length, 0);
    if (this.sig.states.length || length > available) throw new Error("no such prefix");
    const D = kv.headDim;
    const buffers = kv.entries.map(() => newKvArray(kv.type, kv.heads * (this.sliced ? promptLength : length) * D));
    const presents = kv.entries.map((_, i) => {
      let at = 0;
      for (const part of parts) {
        if (at >= length) break;
        const from = part.presents[i];
        const columns = Math.min(part.length, length - at);
        copyRow(kvData(from), 0, from.dims[2], buffers[i], 0, length, columns, kv.heads, D, at);
        at += columns;
      }
      return kvTensor(kv.type, buffers[i].subarray(0, kv.heads * length * D), [1, kv.heads, length, D]);
    });
    return { presents, length, buffers: this.sliced ? buffers : undefined };
  }
}

/**
 * Copies `length` columns of row `row` of a [rows, heads, stride, D] cache into row `toRow` of a
 * [*, heads, toStride, D] one (columns 0.. of the source, from column `at` of the destination).
 */
export function copyRow(
  src: KvArray,
  row: number,
  stride: number,
  dst: KvArray,
  toRow: number,
  toStride: number,
  length: number,
  heads: number,
  D: number,
  at = 0,
) {
  for (let h = 0; h < heads; h++) {
    const from = (row * heads + h) * stride * D;
    dst.set(src.subarray(from, from + length * D), ((toRow * heads + h) * toStride + at) * D);
  }
}

/**
 * Re-strides `blocks` consecutive blocks (a cache's rows × heads) from `from` to `to` columns
 * each, in place, keeping the first `length` columns of each (or length(b) of block b). Growing,
 * blocks move up: last first; shrinking, they move down: first first. Either way a block is
 * written only over columns whose contents have already moved. The buffer must hold blocks × to.
 */
export function restrideBlocks(
  buf: KvArray,
  blocks: number,
  D: number,
  from: number,
  to: number,
  length: number | ((block: number) => number),
) {
  if (from === to) return;
  for (let k = 0; k < blocks; k++) {
    const b = to > from ? blocks - 1 - k : k;
    const len = typeof length === "number" ? length : length(b);
    buf.copyWithin(b * to * D, b * from * D, (b * from + len) * D);
  }
}

export const kvData = (t: OrtTensor) => t.data as KvArray;
