// The seam between the scheduler and a graph layout. The scheduler prefills one sequence at a
// time and decodes all running sequences in steps; how the KV cache is stored, how positions
// reach the graph and how many passes a step takes belong to the layout (see ./index.ts).
import type { KvArray, OrtTensor } from "../session";

/** One prefilled sequence: its cache, [1, heads, length, head_dim] per entry. */
export interface PrefillState {
  presents: OrtTensor[];
  length: number;
  /**
   * Buffers sized for the whole prompt that `presents` are views of, when the graph hands back
   * only a chunk's columns (GraphIo.prefill): the next chunk's columns go in there.
   */
  buffers?: KvArray[];
  /** The recurrent states after the prompt so far, one row each (graphs with states only). */
  states?: KvArray[];
  /**
   * The most tokens the row's cache will come to hold (its prompt + max_tokens), where the
   * scheduler knows it: a batch keeps no room for the row past it (see ./kv-rows.ts).
   */
  span?: number;
}

export interface DecodeBatch {
  /** Rows (sequences) in the batch, in the scheduler's order. */
  readonly size: number;
  readonly bytes: number;
  /** Cache columns per row (capacity), for stats. */
  readonly columns: number;
  /** Bytes of cache copied by membership and capacity changes so far, where the layout counts them. */
  readonly moved?: number;
  /** Cache buffer allocations so far, where the layout keeps its buffers across steps. */
  readonly allocations?: number;
  /**
   * New membership: the current rows at indices `keep` (in that order), then one row per joiner
   * (a joiner listed twice gets two rows: a request's n sequences share their prompt's cache).
   * The scheduler keeps surviving rows in their slots where it can (keep[i] === i), fills a
   * leaving row's slot from the end (keep[i] > i) and appends joiners, so a layout that stores
   * rows in place needs to move only the rows whose index changes.
   */
  reshape(keep: readonly number[], joiners: readonly PrefillState[]): void;
  /**
   * Feeds tokens[i] to row i; returns each row's next-token logits (valid until the next step). A
   * layout that runs a step as several passes awaits `between` between them (the scheduler may
   * run a prefill there; membership does not change until the next reshape).
   */
  step(tokens: readonly number[], between?: () => Promise<void>): Promise<Float32Array[]>;
  /**
   * A copy of row `row`'s cache as it stands (every token fed so far) from column `from` on, as a
   * prefilled state of those columns: null for graphs with recurrent states, whose rows cannot be
   * cut back to a beginning.
   */
  extract(row: number, from?: number): PrefillState | null;
}

/**
 * The bytes a batch's buffers (caches and recurrent states) may hold with their headroom, read
 * whenever they grow: past it they grow only to what their rows' spans need (./kv-rows.ts).
 */
export type BatchLimit = () => number;

export interface ModelRunner {
  readonly layout: LayoutName;
  /**
   * Runs prompt tokens [start, end) of one sequence whose first `start` tokens are in `state`
   * (null when start is 0); returns the cache so far and the logits after token end - 1.
   */
  prefill(
    state: PrefillState | null,
    ids: readonly number[],
    start: number,
    end: number,
  ): Promise<{ state: PrefillState; logits: Float32Array }>;
  /**
   * A new state holding the first `length` tokens of `parts` (read only; a cache in parts, one
   * after another), with room for a prompt of `promptLength` tokens, for prefill to go on from.
   * Caches only (not recurrent states).
   */
  prefix(parts: readonly PrefillState[], length: number, promptLength: number): PrefillState;
  createBatch(limit?: BatchLimit): DecodeBatch;
}

export type LayoutName = "padded" | "gqa" | "exact-length";
