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

export class GraphIo {
  readonly rowSize: number; // cache elements per token per entry (heads × head_dim)
  private readonly keepLast = new ort.Tensor("int64", BigInt64Array.of(1n), []);

  constructor(
    readonly sig: GraphSignature,
    readonly session: GraphSession,
    readonly vocabSize: number,
  ) {
    this.rowSize = sig.kv.heads * sig.kv.headDim;
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

  /** Runs prompt tokens [start, end) of one sequence on top of `state`. */
  async prefill(state: PrefillState | null, ids: readonly number[], start: number, end: number) {
    const { kv } = this.sig;
    const S = end - start;
    const feeds = {
      ...this.inputs(ids.slice(start, end), 1, S, () => Array.from({ length: S }, (_, i) => start + i), start > 0),
      attention_mask: onesMask(1, end),
      ...this.past(state?.presents ?? kv.entries.map(() => newKvArray(kv.type, 0)), [1, kv.heads, 0, kv.headDim]),
    };
    const fetches: Record<string, OrtTensor | null> = { logits: null };
    for (const e of kv.entries) fetches[e.present] = null;
    const out = await this.session.run(feeds, fetches);
    const presents = kv.entries.map((e) => out[e.present]);
    return { state: { presents, length: end }, logits: this.lastLogits(out.logits, 1)[0] };
  }
}

/**
 * Copies `length` columns of row `row` of a [rows, heads, stride, D] cache into row `toRow` of a
 * [*, heads, toStride, D] one (columns 0.. of both).
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
) {
  for (let h = 0; h < heads; h++) {
    const from = (row * heads + h) * stride * D;
    dst.set(src.subarray(from, from + length * D), (toRow * heads + h) * toStride * D);
  }
}

export const kvData = (t: OrtTensor) => t.data as KvArray;
