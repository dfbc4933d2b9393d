// Layout "exact-length": graphs without position_ids, which derive positions from the past
// length (or the mask). Padding would shift those positions, so rows only share a pass with
// rows of the same length, and then without any padding: each group's past is exactly the
// `present` its previous pass returned (no copy). Rows of different lengths run in separate
// passes; a joiner whose prompt length matches a group joins it.
import type { DecodeBatch, PrefillState } from "./layout";
import { kvData, type GraphIo } from "./feeds";
import { kvTensor, newKvArray, onesMask, type OrtTensor } from "../session";

interface Group {
  /** Batch rows in this group, in the group's row order. */
  rows: number[];
  length: number;
  /** Per cache entry, [rows.length, heads, length, head_dim]. */
  past: OrtTensor[];
}

export class ExactLengthBatch implements DecodeBatch {
  private groups: Group[] = [];
  private count = 0;

  constructor(private readonly io: GraphIo) {}

  get size() {
    return this.count;
  }
  get bytes() {
    return this.groups.reduce((a, g) => a + g.past.reduce((s, t) => s + kvData(t).byteLength, 0), 0);
  }
  get columns() {
    return Math.max(0, ...this.groups.map((g) => g.length));
  }

  reshape(keep: readonly number[], joiners: readonly PrefillState[]) {
    const newIndex = new Map(keep.map((old, i) => [old, i]));
    const groups: Group[] = [];
    for (const g of this.groups) {
      const kept = g.rows.map((r, i) => ({ to: newIndex.get(r), i })).filter((k) => k.to !== undefined);
      if (kept.length === 0) continue;
      const past =
        kept.length === g.rows.length
          ? g.past
          : g.past.map((t) =>
              this.rows(
                kept.map((k) => ({ t, row: k.i })),
                g.length,
              ),
            );
      groups.push({ rows: kept.map((k) => k.to!), length: g.length, past });
    }
    joiners.forEach((j, i) => {
      const row = keep.length + i;
      const alone = this.io.sig.rowsInteract || this.io.sig.batchOfOne;
      const same = alone ? undefined : groups.find((g) => g.length === j.length);
      if (!same) {
        groups.push({ rows: [row], length: j.length, past: j.presents });
        return;
      }
      same.past = same.past.map((t, e) =>
        this.rows([...same.rows.map((_, r) => ({ t, row: r })), { t: j.presents[e], row: 0 }], same.length),
      );
      same.rows.push(row);
    });
    this.groups = groups;
    this.count = keep.length + joiners.length;
  }

  /** A new [n, heads, length, head_dim] cache entry made of rows of other ones. */
  private rows(sources: { t: OrtTensor; row: number }[], length: number): OrtTensor {
    const { kv } = this.io.sig;
    const per = this.io.rowSize * length;
    const out = newKvArray(kv.type, sources.length * per);
    sources.forEach((s, i) => out.set(kvData(s.t).subarray(s.row * per, (s.row + 1) * per), i * per));
    return kvTensor(kv.type, out, [sources.length, kv.heads, length, kv.headDim]);
  }

  async step(tokens: readonly number[], between?: () => Promise<void>): Promise<Float32Array[]> {
    const { kv } = this.io.sig;
    const out: Float32Array[] = new Array(this.count);
    for (const [i, g] of this.groups.entries()) {
      if (i > 0 && between) await between();
      const n = g.rows.length;
      const fetches: Record<string, OrtTensor | null> = { logits: null };
      for (const e of kv.entries) fetches[e.present] = null;
      const result = await this.io.session.run(
        {
          ...this.io.inputs(
            g.rows.map((r) => tokens[r]),
            n,
            1,
            () => new Array<number>(n).fill(g.length),
            true,
          ),
          attention_mask: onesMask(n, g.length + 1),
          ...this.io.past(g.past, [n, kv.heads, g.length, kv.headDim]),
        },
        fetches,
      );
      g.past = kv.entries.map((e) => result[e.present]);
      g.length++;
      this.io.lastLogits(result.logits, n).forEach((row, i) => (out[g.rows[i]] = row));
    }
    return out;
  }
}
