// The recurrent states of a batch's rows, or of an exact-length group's (hybrid models, see
// GraphSignature.states): one buffer per state entry holding every row's state back to back,
// [rows, ...dims]. A pass is fed views of them and writes the rows' next states into a second
// set of buffers (onnxruntime must not write over an input it is reading); the two sets are then
// swapped, so a step copies nothing. Unlike the KV cache a state does not grow with the sequence:
// a membership change simply builds new buffers from the kept rows and the joiners' prompt
// states (a few kB to a few MB per row).
import type { StateEntry } from "../graph-signature";
import { kvTensor, newKvArray, type KvArray, type OrtTensor } from "../session";
import type { ModelRunner, PrefillState } from "./layout";

export class StateRows {
  private current: KvArray[];
  private next: KvArray[];
  rows = 0;

  constructor(private readonly entries: readonly StateEntry[]) {
    this.current = entries.map((s) => newKvArray(s.type, 0));
    this.next = this.current;
  }

  get bytes() {
    return [...this.current, ...this.next].reduce((a, b) => a + b.byteLength, 0);
  }

  /** What one row's states take, both copies. */
  get rowBytes() {
    return stateBytesPerRow(this.entries);
  }

  /** Rows `keep` of the current ones (in that order), then one row per joiner. */
  reshape(keep: readonly number[], joiners: readonly PrefillState[]) {
    const rows = keep.length + joiners.length;
    this.current = this.entries.map((s, e) => {
      const buf = newKvArray(s.type, rows * s.elems);
      keep.forEach((from, to) => buf.set(this.current[e].subarray(from * s.elems, (from + 1) * s.elems), to * s.elems));
      joiners.forEach((j, i) => buf.set(j.states![e], (keep.length + i) * s.elems));
      return buf;
    });
    this.next = this.entries.map((s) => newKvArray(s.type, rows * s.elems));
    this.rows = rows;
  }

  /**
   * Rows r0..r1-1's states as a pass's inputs, and the buffers it writes their next states to
   * (a step may take several passes, each over some of the rows).
   */
  io(r0 = 0, r1 = this.rows): { feeds: Record<string, OrtTensor>; fetches: Record<string, OrtTensor> } {
    const feeds: Record<string, OrtTensor> = {};
    const fetches: Record<string, OrtTensor> = {};
    this.entries.forEach((s, e) => {
      const dims = [r1 - r0, ...s.dims];
      const [from, to] = [r0 * s.elems, r1 * s.elems];
      feeds[s.past] = kvTensor(s.type, this.current[e].subarray(from, to), dims);
      fetches[s.present] = kvTensor(s.type, this.next[e].subarray(from, to), dims);
    });
    return { feeds, fetches };
  }

  /** After a step's passes: the states they wrote become the rows' states. */
  advance() {
    [this.current, this.next] = [this.next, this.current];
  }
}

/** One row's recurrent states, both copies: the pass reads one and writes the other. */
export const stateBytesPerRow = (entries: readonly StateEntry[]) =>
  entries.reduce((a, s) => a + 2 * s.elems * (s.type === "float16" ? 2 : 4), 0);

/** A prompt's first pass starts from zero states (as transformers.js' generate() does). */
export const zeroStates = (entries: readonly StateEntry[]) => entries.map((s) => newKvArray(s.type, s.elems));

/**
 * Whether the graph runs a prompt chunk on top of a cache at all: some exports build their causal
 * mask for either a prompt from the start or one token at a time (onnxruntime-genai's builder,
 * `attn_mask_reformat` for MultiHeadAttention: a chunk of 2 over a past of 2 fails "invalid expand
 * shape"). transformers.js' generate() never asks for that; the engine's chunked prefill does.
 */
export async function runsChunksOnCache(runner: ModelRunner, vocabSize: number): Promise<boolean> {
  const ids = [1, 2, 3, 4].map((i) => (i * 7919 + 13) % vocabSize);
  try {
    const first = await runner.prefill(null, ids, 0, 2);
    await runner.prefill(first.state, ids, 2, 4);
    return true;
  } catch {
    return false;
  }
}

/** The probe's prompt: arbitrary ids, split in two chunks of PROBE_LENGTH / 2. */
const PROBE_LENGTH = 16;

/**
 * Whether a graph with states computes a prompt's chunk right on top of the chunk before it, so
 * that its prompts may be prefilled in chunks like any other graph's. Whether an export does is up
 * to how it was traced (a state update written for one new token, or for a fresh sequence only,
 * takes no incoming state for a longer input). So the last position's logits of a probe prompt
 * are computed three ways: in one pass; in two chunks, the second on the first's cache and states;
 * and in the same two chunks with the states zeroed in between (what an export that ignores them
 * computes). The states carry when the chunked logits are within a tenth of the distance that
 * zeroing them makes (float rounding aside, they are then the one-pass logits).
 */
export async function statesCarryAcrossChunks(runner: ModelRunner, states: readonly StateEntry[], vocabSize: number) {
  const ids = Array.from({ length: PROBE_LENGTH }, (_, i) => (i * 7919 + 13) % vocabSize);
  const half = PROBE_LENGTH / 2;
  const whole = (await runner.prefill(null, ids, 0, PROBE_LENGTH)).logits;
  const chunked = async (zeroed: boolean) => {
    // Each run needs a first chunk of its own: the second writes into the first's cache buffers.
    const first = await runner.prefill(null, ids, 0, half);
    const state = zeroed ? { ...first.state, states: zeroStates(states) } : first.state;
    return (await runner.prefill(state, ids, half, PROBE_LENGTH)).logits;
  };
  const distance = (a: Float32Array, b: Float32Array) => a.reduce((d, v, i) => Math.max(d, Math.abs(v - b[i])), 0);
  const carried = distance(await chunked(false), whole);
  const ignored = distance(await chunked(true), whole);
  return carried <= ignored / 10;
}
