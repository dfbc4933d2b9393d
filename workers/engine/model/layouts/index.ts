// The graph layouts the engine serves, one module each, and the rule that picks one. This table
// is the capability table documented in docs/api.md ("Model layouts"); a graph none of them
// fits is refused at load by readGraphSignature, naming what it lacks.
import type { GraphSignature } from "../graph-signature";
import type { GraphSession } from "../session";
import { ExactLengthBatch } from "./exact-length";
import { GraphIo } from "./feeds";
import { GqaBatch } from "./gqa";
import type { BatchLimit, DecodeBatch, LayoutName, ModelRunner } from "./layout";
import { PaddedBatch } from "./padded";

export interface LayoutCapabilities {
  name: LayoutName;
  /** Which graphs get this layout. */
  serves: string;
  positions: string;
  batching: string;
  cacheUpdate: string;
  create: (io: GraphIo, limit?: BatchLimit) => DecodeBatch;
}

export const LAYOUTS: readonly LayoutCapabilities[] = [
  {
    name: "gqa",
    serves: "graphs with com.microsoft GroupQueryAttention (onnxruntime-genai model builder)",
    positions: "computed by the op from seqlens_k = sum(attention_mask) - 1",
    batching: "all rows in one pass, right-padded to the longest",
    cacheUpdate:
      "each row's new column (written by the op at its length), fetched alone (model/last-token-outputs.ts), copied into a preallocated cache",
    create: (io, limit) => new GqaBatch(io, limit),
  },
  {
    name: "padded",
    serves:
      "graphs with a position_ids input (Optimum / transformers.js exports), per-tensor quantized ones " +
      "(q8/int8/uint8) with their activations quantized row by row (model/row-quantization.ts)",
    positions: "fed per row",
    batching: "all rows in one pass, shorter rows padded and masked by attention_mask",
    cacheUpdate:
      "the fed token's column, fetched alone (model/last-token-outputs.ts), copied into a preallocated cache",
    create: (io, limit) => new PaddedBatch(io, limit),
  },
  {
    name: "exact-length",
    serves:
      "graphs without position_ids (positions from the past length or the mask), and graphs that " +
      "fix their batch at 1 or quantize activations per tensor as they are (DynamicQuantizeLinear: " +
      "q8/int8/uint8 files without row-wise quantization), one row per pass",
    positions: "the graph's own, from the past length",
    batching: "rows of equal length share a pass; no padding ever",
    cacheUpdate:
      "the fed token's column, fetched alone (model/last-token-outputs.ts), appended in place (the cache re-strided to the new length)",
    create: (io, limit) => new ExactLengthBatch(io, undefined, limit),
  },
];

export function pickLayout(sig: GraphSignature): LayoutCapabilities {
  // Rows that interact within a pass run alone, and then without padding: the same shapes as
  // transformers.js' own generate(), hence the same numbers (a padded pass changes the order of
  // float sums in attention, which per-tensor activation quantization can amplify into another token).
  // (A hybrid model's recurrent states do not change the choice: padding only ever pads a row's
  // past keys and values, and a decoding row's states take its one fed token.)
  const name: LayoutName = sig.groupQueryAttention
    ? "gqa"
    : sig.positionIds && !sig.rowsInteract && !sig.batchOfOne
      ? "padded"
      : "exact-length";
  return LAYOUTS.find((l) => l.name === name)!;
}

export function createRunner(sig: GraphSignature, session: GraphSession, vocabSize: number): ModelRunner {
  const io = new GraphIo(sig, session, vocabSize);
  const layout = pickLayout(sig);
  return {
    layout: layout.name,
    prefill: (state, ids, start, end) => io.prefill(state, ids, start, end),
    prefix: (parts, length, promptLength) => io.prefix(parts, length, promptLength),
    createBatch: (limit) => layout.create(io, limit),
  };
}
