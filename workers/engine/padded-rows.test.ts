// The padded layout's cache rows across membership and capacity changes, on a fake graph that
// checks what it is fed: each row's logits report the sum of the cache columns its mask lets
// through, its length and its position, so a row's cache copied to another slot, a column lost
// in a re-stride or a stale mask shows up as a wrong number for that row.
import { describe, expect, it, vi } from "vitest";
import { GraphIo } from "./model/layouts/feeds";
import { KvRows } from "./model/layouts/kv-rows";
import { PaddedBatch } from "./model/layouts/padded";
import { capacityFor } from "./model/layouts/rows-batch";
import {
  changeMembership,
  D,
  ENTRIES,
  fakeSession,
  fakeSignature,
  HEADS,
  kvValue,
  prefillState,
  prng,
} from "./testing/kv-cache";
import { keptSlots } from "./scheduler";

const V = 5;

/**
 * A graph with the padded layout's signature. present = past with the fed token's values in
 * column `cap`; logits row r = [sum of token values in the columns the mask lets through (entry
 * 0, head 0, element 0), number of those columns, position_ids[r], mask[r][cap], columns whose
 * entries/heads/elements disagree with element 0 of entry 0 head 0].
 */
function fakeGraph() {
  const sig = fakeSignature(V, { positionIds: true });
  const session = fakeSession(async (feeds, fetches) => {
    const ids = feeds.input_ids.data as BigInt64Array;
    const pos = feeds.position_ids.data as BigInt64Array;
    const [B, heads, cap, dim] = feeds["past.0"].dims;
    const mask = feeds.attention_mask.data as BigInt64Array;
    expect(feeds.attention_mask.dims).toEqual([B, cap + 1]);
    expect(mask.length).toBe(B * (cap + 1));
    const at = (r: number, h: number, c: number, d: number, stride: number) => ((r * heads + h) * stride + c) * dim + d;
    for (let e = 0; e < ENTRIES; e++) {
      const past = feeds[`past.${e}`];
      const present = fetches[`present.${e}`]!;
      expect(past.dims).toEqual([B, heads, cap, dim]);
      expect(past.data.length).toBe(B * heads * cap * dim);
      expect(present.dims).toEqual([B, heads, cap + 1, dim]);
      expect(present.data.length).toBe(B * heads * (cap + 1) * dim);
      const src = past.data as Float32Array;
      const dst = present.data as Float32Array;
      for (let r = 0; r < B; r++)
        for (let h = 0; h < heads; h++) {
          for (let c = 0; c < cap; c++)
            for (let d = 0; d < dim; d++) dst[at(r, h, c, d, cap + 1)] = src[at(r, h, c, d, cap)];
          for (let d = 0; d < dim; d++) dst[at(r, h, cap, d, cap + 1)] = kvValue(Number(ids[r]), e, h, d);
        }
    }
    const logits = fetches.logits!;
    expect(logits.dims).toEqual([B, 1, V]);
    const out = logits.data as Float32Array;
    const p0 = feeds["past.0"].data as Float32Array;
    for (let r = 0; r < B; r++) {
      let sum = 0;
      let count = 0;
      let wrong = 0;
      for (let c = 0; c < cap; c++) {
        if (mask[r * (cap + 1) + c] !== 1n) continue;
        const token = p0[at(r, 0, c, 0, cap)];
        sum += token;
        count++;
        for (let e = 0; e < ENTRIES; e++)
          for (let h = 0; h < heads; h++)
            for (let d = 0; d < dim; d++)
              if ((feeds[`past.${e}`].data as Float32Array)[at(r, h, c, d, cap)] !== kvValue(token, e, h, d)) wrong++;
      }
      out.set([sum, count, Number(pos[r]), Number(mask[r * (cap + 1) + cap]), wrong], r * V);
    }
    return {};
  });
  return { io: new GraphIo(sig, session, V), session };
}

describe("keptSlots", () => {
  it("keeps survivors in their slots and fills holes from the end, in order", () => {
    expect(keptSlots([true, true, true])).toEqual([0, 1, 2]);
    expect(keptSlots([true, true, false])).toEqual([0, 1]);
    expect(keptSlots([true, false, true, true])).toEqual([0, 3, 2]);
    expect(keptSlots([false, true, false, true, true, true])).toEqual([4, 1, 5, 3]);
    expect(keptSlots([false, false, true])).toEqual([2]);
    expect(keptSlots([false, false])).toEqual([]);
  });

  it("never moves a row to a higher slot", () => {
    const rand = prng(7);
    for (let i = 0; i < 200; i++) {
      const alive = Array.from({ length: Math.floor(rand() * 12) }, () => rand() < 0.6);
      const keep = keptSlots(alive);
      expect(keep.length).toBe(alive.filter(Boolean).length);
      expect(new Set(keep).size).toBe(keep.length);
      keep.forEach((from, to) => {
        expect(alive[from]).toBe(true);
        expect(from).toBeGreaterThanOrEqual(to);
      });
    }
  });
});

describe("KvRows", () => {
  const shape = { type: "float32" as const, entries: ENTRIES, heads: HEADS, headDim: D };
  const rowOf = (rows: KvRows, r: number) => {
    const tokens: number[] = [];
    for (let c = 0; c < rows.lengths[r]; c++) tokens.push(rows.buffers[0][(r * HEADS * rows.stride + c) * D]);
    for (let e = 0; e < ENTRIES; e++)
      for (let h = 0; h < HEADS; h++)
        tokens.forEach((t, c) => {
          for (let d = 0; d < D; d++)
            expect(rows.buffers[e][((r * HEADS + h) * rows.stride + c) * D + d]).toBe(kvValue(t, e, h, d));
        });
    return tokens;
  };
  const rowBytes = (rows: KvRows) => HEADS * rows.stride * D * 4 * ENTRIES;

  it("joins copy only the joiner; a leave from the end moves nothing; one from the middle moves one row", () => {
    const rows = new KvRows(shape);
    rows.reshape([], [prefillState([1, 2, 3]), prefillState([4, 5])], 20);
    expect(rows.lengths).toEqual([3, 2]);
    expect([rowOf(rows, 0), rowOf(rows, 1)]).toEqual([
      [1, 2, 3],
      [4, 5],
    ]);
    const promptBytes = (n: number) => n * HEADS * D * 4 * ENTRIES;
    expect(rows.moved).toBe(promptBytes(5));
    expect(rows.allocations).toBe(1);

    rows.reshape([0, 1], [prefillState([6]), prefillState([7, 8, 9, 10])], 20);
    expect(rows.moved).toBe(promptBytes(10)); // the joiners' columns only
    expect(rows.allocations).toBe(1); // within the headroom: no new buffers

    let moved = rows.moved;
    rows.reshape(keptSlots([true, true, true, false]), [], 20); // the last row leaves
    expect(rows.moved).toBe(moved);
    expect([0, 1, 2].map((r) => rowOf(rows, r))).toEqual([[1, 2, 3], [4, 5], [6]]);

    moved = rows.moved;
    rows.reshape(keptSlots([false, true, true]), [], 20); // the first leaves: the last takes its slot
    expect(rows.moved).toBe(moved + rowBytes(rows));
    expect(rows.lengths).toEqual([1, 2]);
    expect([rowOf(rows, 0), rowOf(rows, 1)]).toEqual([[6], [4, 5]]);
    expect(rows.allocations).toBe(1);
  });

  it("re-strides in place, growing and shrinking, without losing a column", () => {
    const rows = new KvRows(shape);
    rows.reshape([], [prefillState([1, 2, 3, 4]), prefillState([5, 6]), prefillState([7, 8, 9])], 6);
    rows.resize(8); // within the headroom (1.5×): in place
    expect(rows.stride).toBe(8);
    expect(rows.allocations).toBe(1);
    expect([0, 1, 2].map((r) => rowOf(rows, r))).toEqual([
      [1, 2, 3, 4],
      [5, 6],
      [7, 8, 9],
    ]);
    rows.resize(5);
    expect(rows.allocations).toBe(1);
    expect([0, 1, 2].map((r) => rowOf(rows, r))).toEqual([
      [1, 2, 3, 4],
      [5, 6],
      [7, 8, 9],
    ]);
    rows.resize(40); // past the room: new buffers, rows copied across
    expect(rows.allocations).toBe(2);
    expect([0, 1, 2].map((r) => rowOf(rows, r))).toEqual([
      [1, 2, 3, 4],
      [5, 6],
      [7, 8, 9],
    ]);
  });

  it("gives back room over 4× the need only once it has stayed that large for shrinkAfterMs", () => {
    vi.useFakeTimers({ toFake: ["performance"] });
    try {
      const many = (from: number) => Array.from({ length: 16 }, (_, i) => prefillState([from + i, from + i + 1]));
      const rows = new KvRows(shape, 1000);
      rows.reshape([], many(1), 8);
      const big = rows.bytes;
      rows.reshape([0], [], 8); // one row left: far too much room, kept for now
      vi.advanceTimersByTime(600);
      rows.reshape([0], many(20).slice(1), 8); // full again: the clock starts over
      rows.reshape([0], [], 8);
      vi.advanceTimersByTime(900);
      rows.resize(9);
      expect([rows.allocations, rows.bytes]).toEqual([1, big]);
      vi.advanceTimersByTime(200); // 1,100 ms too large
      rows.resize(10);
      expect(rows.allocations).toBe(2);
      expect(rows.bytes).toBeLessThan(big / 4);
      expect(rowOf(rows, 0)).toEqual([1, 2]);

      const eager = new KvRows(shape, 0);
      eager.reshape([], many(1), 8);
      eager.reshape([3], [], 8);
      expect(eager.allocations).toBe(2);
      expect(rowOf(eager, 0)).toEqual([4, 5]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("takes any order of kept rows (rows moving up are staged first)", () => {
    const rows = new KvRows(shape);
    rows.reshape([], [prefillState([1]), prefillState([2, 3]), prefillState([4, 5, 6]), prefillState([7])], 8);
    rows.reshape([3, 2, 0, 1], [prefillState([8, 9])], 8);
    expect(rows.lengths).toEqual([1, 3, 1, 2, 2]);
    expect([0, 1, 2, 3, 4].map((r) => rowOf(rows, r))).toEqual([[7], [4, 5, 6], [1], [2, 3], [8, 9]]);
  });
});

describe("PaddedBatch", () => {
  it("every row sees exactly its own tokens through joins, leaves and capacity growth", async () => {
    const { io, session } = fakeGraph();
    const batch = new PaddedBatch(io);
    const rand = prng(42);
    /** The sequences in the batch's slots: the tokens in each one's cache. */
    let slots: number[][] = [];
    let nextToken = 1;
    const token = () => (nextToken++ % 50) + 1;
    let steps = 0;
    const capacities = new Set<number>();
    for (let round = 0; round < 300; round++) {
      // Some leave (the scheduler's slot rule), some join.
      slots = changeMembership(batch, slots, rand, token, {
        joinChance: 0.15,
        joinerLength: () => 1 + Math.floor(rand() * 12),
      });
      expect(batch.size).toBe(slots.length);
      if (slots.length === 0) continue;
      const fed = slots.map(() => token());
      const logits = await batch.step(fed);
      steps++;
      slots.forEach((seq, r) => {
        const sum = seq.reduce((a, b) => a + b, 0);
        expect([...logits[r]], `round ${round}, row ${r}`).toEqual([sum, seq.length, seq.length, 1, 0]);
        seq.push(fed[r]);
      });
      const longest = Math.max(...slots.map((s) => s.length));
      expect(batch.columns).toBeGreaterThanOrEqual(longest);
      expect(batch.columns).toBeLessThanOrEqual(capacityFor(longest));
      capacities.add(batch.columns);
    }
    expect(session.stats.forwardCalls).toBe(steps);
    expect(capacities.size).toBeGreaterThan(4); // it grew and shrank along the way
  });

  it("a short row joining and leaving a batch of long ones copies only its own prompt", async () => {
    const { io } = fakeGraph();
    const batch = new PaddedBatch(io);
    const long = Array.from({ length: 16 }, (_, i) => Array.from({ length: 30 }, (__, c) => ((i + c) % 40) + 1));
    batch.reshape([], long.map(prefillState));
    for (let s = 0; s < 3; s++) await batch.step(long.map(() => 1));
    const before = batch.moved;
    const bytes = batch.bytes;
    batch.reshape([...long.keys()], [prefillState([3, 4])]);
    const logits = await batch.step([...long.map(() => 1), 9]);
    expect([...logits[16]]).toEqual([7, 2, 2, 1, 0]);
    expect([...logits[5]].slice(1)).toEqual([33, 33, 1, 0]);
    batch.reshape(keptSlots([...long.map(() => true), false]), []);
    expect(batch.moved - before).toBe(2 * HEADS * D * 4 * ENTRIES); // its two prompt columns, nothing else
    expect(batch.bytes).toBe(bytes); // and the same buffers
  });
});
