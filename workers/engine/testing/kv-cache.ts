// Fake caches for the layout tests (padded-rows.test.ts, exact-length.test.ts): every cache value
// says which token left it and where, so a row's cache copied to another row, a column lost in a
// re-stride or a stale column shows up as a wrong number.
import * as ort from "onnxruntime-node";
import type { GraphSignature } from "../model/graph-signature";
import type { DecodeBatch, PrefillState } from "../model/layouts/layout";
import type { GraphSession } from "../model/session";
import { keptSlots } from "../scheduler";

export const HEADS = 2;
export const D = 3;
export const ENTRIES = 2;

/** The cache value a token leaves at entry e, head h, element d (exact in float32). */
export const kvValue = (token: number, e: number, h: number, d: number) => token + e * 100000 + h * 10000 + d * 1000;

/** A prompt's cache as prefill returns it: [1, heads, length, D] per entry. */
export function prefillState(tokens: number[]): PrefillState {
  const presents = Array.from({ length: ENTRIES }, (_, e) => {
    const data = new Float32Array(HEADS * tokens.length * D);
    for (let h = 0; h < HEADS; h++)
      tokens.forEach((t, c) => {
        for (let d = 0; d < D; d++) data[(h * tokens.length + c) * D + d] = kvValue(t, e, h, d);
      });
    return new ort.Tensor("float32", data, [1, HEADS, tokens.length, D]);
  });
  return { presents, length: tokens.length };
}

/** Deterministic numbers in [0, 1) for the random walks. */
export function prng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/**
 * A float32 graph signature of ENTRIES cache entries `past.e` / `present.e` (with `sliced`, the
 * new-column outputs `present.e.last_token` too), HEADS heads of D elements, a vocabulary of
 * `vocabSize`, and the flags in `flags`.
 */
export function fakeSignature(
  vocabSize: number,
  { sliced = false, ...flags }: Partial<Pick<GraphSignature, "positionIds" | "rowsInteract">> & { sliced?: boolean },
): GraphSignature {
  return {
    kv: {
      entries: Array.from({ length: ENTRIES }, (_, e) => ({
        past: `past.${e}`,
        present: `present.${e}`,
        ...(sliced ? { lastToken: `present.${e}.last_token` } : {}),
      })),
      heads: HEADS,
      headDim: D,
      type: "float32",
    },
    states: [],
    logitsType: "float32",
    vocabSize,
    positionIds: false,
    numLogitsToKeep: false,
    useCacheBranch: false,
    groupQueryAttention: false,
    rowsInteract: false,
    batchOfOne: false,
    ...flags,
  };
}

/** A session whose passes are `run` (counted in stats.forwardCalls, as the real one counts them). */
export function fakeSession(run: GraphSession["run"]): GraphSession {
  const stats = { forwardCalls: 0, splitPasses: 0 };
  return {
    inputs: [],
    outputs: [],
    rowWise: false,
    unchanged: false,
    splitAttention: false,
    stats,
    quietly: (probe) => probe(),
    dispose: async () => {},
    run: (feeds, fetches) => {
      stats.forwardCalls++;
      return run(feeds, fetches);
    },
  };
}

/**
 * One membership change of a random walk over `batch`: each row leaves with probability 0.08
 * (the survivors kept in slots as the scheduler keeps them), and while fewer than 3 rows run, or
 * else with probability `joinChance`, 1–3 joiners of `joinerLength()` tokens join. `slots` holds
 * each row's tokens; returns it as it is after the change.
 */
export function changeMembership(
  batch: DecodeBatch,
  slots: number[][],
  rand: () => number,
  token: () => number,
  { joinChance, joinerLength }: { joinChance: number; joinerLength: () => number },
): number[][] {
  const keep = keptSlots(slots.map(() => rand() > 0.08));
  const joiners = Array.from({ length: slots.length < 3 || rand() < joinChance ? 1 + Math.floor(rand() * 3) : 0 }, () =>
    Array.from({ length: joinerLength() }, token),
  );
  if (keep.length === slots.length && joiners.length === 0) return slots;
  batch.reshape(keep, joiners.map(prefillState));
  return [...keep.map((i) => slots[i]), ...joiners];
}
