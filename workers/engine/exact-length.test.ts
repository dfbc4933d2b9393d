// The exact-length layout's cache across joins, leaves and growth, on a fake graph that checks
// what it is fed: each pass must get [rows, heads, length, D] pasts of exactly its rows' length
// (no padding, an all-ones mask, no positions), and each row's logits report the sum and count
// of the tokens in its past and how many cache values disagree with them, so a row's cache copied
// to another row, a column lost in a re-stride or a stale column shows up as a wrong number.
import * as ort from "onnxruntime-node";
import { describe, expect, it, vi } from "vitest";
import { GraphIo } from "./model/layouts/feeds";
import { ExactLengthBatch } from "./model/layouts/exact-length";
import type { OrtTensor } from "./model/session";
import { changeMembership, ENTRIES, fakeSession, fakeSignature, kvValue, prefillState, prng } from "./testing/kv-cache";

const V = 4;

/**
 * A graph with the exact-length layout's signature: no position_ids, and with `sliced` the
 * last-token outputs (else the whole present is fetched). logits row r = [sum of the tokens in
 * row r's past (entry 0, head 0, element 0), its length, values of its past that disagree with
 * that token at their entry, head and element, the fed token].
 */
function fakeGraph({ sliced, rowsInteract }: { sliced: boolean; rowsInteract: boolean }) {
  const sig = fakeSignature(V, { sliced, rowsInteract });
  const passes: { rows: number; length: number }[] = [];
  const session = fakeSession(async (feeds, fetches) => {
    expect(feeds.position_ids).toBeUndefined();
    const ids = feeds.input_ids.data as BigInt64Array;
    const [B, heads, L, dim] = feeds["past.0"].dims;
    passes.push({ rows: B, length: L });
    expect(feeds.attention_mask.dims).toEqual([B, L + 1]);
    expect([...(feeds.attention_mask.data as BigInt64Array)].every((m) => m === 1n)).toBe(true);
    const at = (r: number, h: number, c: number, d: number, stride: number) => ((r * heads + h) * stride + c) * dim + d;
    const out: Record<string, OrtTensor> = {};
    for (let e = 0; e < ENTRIES; e++) {
      const past = feeds[`past.${e}`];
      expect(past.dims).toEqual([B, heads, L, dim]);
      expect(past.data.length).toBe(B * heads * L * dim);
      const src = past.data as Float32Array;
      const columns = sliced ? 1 : L + 1;
      const name = sliced ? `present.${e}.last_token` : `present.${e}`;
      expect(Object.keys(fetches)).toContain(name);
      const dst = new Float32Array(B * heads * columns * dim);
      for (let r = 0; r < B; r++)
        for (let h = 0; h < heads; h++) {
          for (let c = 0; c < columns - 1; c++)
            for (let d = 0; d < dim; d++) dst[at(r, h, c, d, columns)] = src[at(r, h, c, d, L)];
          for (let d = 0; d < dim; d++) dst[at(r, h, columns - 1, d, columns)] = kvValue(Number(ids[r]), e, h, d);
        }
      out[name] = new ort.Tensor("float32", dst, [B, heads, columns, dim]);
    }
    const logits = new Float32Array(B * V);
    const p0 = feeds["past.0"].data as Float32Array;
    for (let r = 0; r < B; r++) {
      let sum = 0;
      let wrong = 0;
      for (let c = 0; c < L; c++) {
        const token = p0[at(r, 0, c, 0, L)];
        sum += token;
        for (let e = 0; e < ENTRIES; e++)
          for (let h = 0; h < heads; h++)
            for (let d = 0; d < dim; d++)
              if ((feeds[`past.${e}`].data as Float32Array)[at(r, h, c, d, L)] !== kvValue(token, e, h, d)) wrong++;
      }
      logits.set([sum, L, wrong, Number(ids[r])], r * V);
    }
    out.logits = new ort.Tensor("float32", logits, [B, 1, V]);
    return out;
  });
  return { io: new GraphIo(sig, session, V), session, passes };
}

describe("ExactLengthBatch", () => {
  for (const sliced of [true, false])
    for (const rowsInteract of [false, true])
      it(`every row sees exactly its own tokens through joins, leaves and growth (${sliced ? "last-token outputs" : "whole presents"}${rowsInteract ? ", one row per pass" : ""})`, async () => {
        const { io, session, passes } = fakeGraph({ sliced, rowsInteract });
        const batch = new ExactLengthBatch(io);
        const rand = prng(sliced ? 11 : 12);
        let slots: number[][] = [];
        let nextToken = 1;
        const token = () => (nextToken++ % 50) + 1;
        let expectedPasses = 0;
        for (let round = 0; round < 250; round++) {
          // Half the joiners have a running row's length, so that they can join its group.
          const running = slots;
          slots = changeMembership(batch, slots, rand, token, {
            joinChance: 0.2,
            joinerLength: () =>
              running.length && rand() < 0.5
                ? running[Math.floor(rand() * running.length)].length
                : 1 + Math.floor(rand() * 12),
          });
          expect(batch.size).toBe(slots.length);
          if (slots.length === 0) continue;
          const fed = slots.map(() => token());
          const before = passes.length;
          const logits = await batch.step(fed);
          slots.forEach((seq, r) => {
            const sum = seq.reduce((a, b) => a + b, 0);
            expect([...logits[r]], `round ${round}, row ${r}`).toEqual([sum, seq.length, 0, fed[r]]);
            seq.push(fed[r]);
          });
          // One pass per length (per row when rows interact), each of rows of that length only.
          const lengths = new Set(slots.map((s) => s.length - 1));
          const mine = passes.slice(before);
          expect(mine.length).toBe(rowsInteract ? slots.length : lengths.size);
          expect(mine.reduce((a, p) => a + p.rows, 0)).toBe(slots.length);
          expect(new Set(mine.map((p) => p.length))).toEqual(lengths);
          expectedPasses += mine.length;
          expect(batch.columns).toBe(Math.max(...slots.map((s) => s.length)));
        }
        expect(session.stats.forwardCalls).toBe(expectedPasses);
      });

  it("requests one after another reuse one set of buffers; a spare set unused for long is dropped", async () => {
    vi.useFakeTimers({ toFake: ["performance"] });
    try {
      const { io } = fakeGraph({ sliced: true, rowsInteract: true });
      const batch = new ExactLengthBatch(io, 1000);
      const request = async (prompt: number[], steps: number) => {
        batch.reshape([], [prefillState(prompt)]);
        for (let s = 0; s < steps; s++) {
          const [row] = await batch.step([7]);
          expect(row[2]).toBe(0);
        }
        batch.reshape([], []);
      };
      await request([1, 2, 3], 60);
      const grown = batch.allocations;
      expect(grown).toBeGreaterThan(1); // it grew along the way
      const bytes = batch.bytes;
      await request([4, 5], 60);
      await request([6], 30);
      expect([batch.allocations, batch.bytes]).toEqual([grown, bytes]);
      vi.advanceTimersByTime(1000);
      batch.reshape([], []);
      expect(batch.bytes).toBe(0);
      expect(batch.allocations).toBe(grown); // counted still
      await request([8, 9], 2);
      expect(batch.allocations).toBe(grown + 1);
    } finally {
      vi.useRealTimers();
    }
  });
});
