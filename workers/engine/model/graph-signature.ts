// What the engine needs to know about a causal LM graph, read from its inputs, outputs and
// operators. Everything the engine cannot feed or read is refused here, at load, with a message
// that names it.
import { loadError } from "../errors";
import type { GraphOps } from "./onnx-scan";

export type KvType = "float32" | "float16";

export interface KvEntry {
  past: string;
  present: string;
  /** The output holding present's fed positions alone (./last-token-outputs.ts), when the graph has it. */
  lastToken?: string;
}

/**
 * A recurrent state of fixed size per row (hybrid models: LFM2's past_conv.N, Mamba's
 * past_conv.N / past_ssm.N, Qwen3.5's past_recurrent.N), fed in and fetched whole each pass.
 */
export interface StateEntry {
  past: string;
  present: string;
  /** One row's shape (the input's dims after the batch dim). */
  dims: number[];
  /** Elements per row. */
  elems: number;
  type: KvType;
}

export interface GraphSignature {
  /** past_key_values.N.key/value in layer order, with their present outputs. */
  kv: { entries: KvEntry[]; heads: number; headDim: number; type: KvType };
  /** Recurrent states, in layer order (none for a transformer's graph). */
  states: StateEntry[];
  logitsType: KvType;
  vocabSize: number | null;
  positionIds: boolean;
  numLogitsToKeep: boolean;
  useCacheBranch: boolean;
  /** com.microsoft GroupQueryAttention: positions and cache writes done by the op itself. */
  groupQueryAttention: boolean;
  /**
   * Activations quantized per tensor at run time (DynamicQuantizeLinear, as in onnxruntime's
   * dynamic quantization: the q8/int8/uint8 files): one row's numbers then depend on the other
   * rows of the same pass, so each sequence must run in a pass of its own.
   */
  rowsInteract: boolean;
  /** The graph's batch dimension is fixed at 1 (some exports pin it): one row per pass. */
  batchOfOne: boolean;
}

export interface ValueMeta {
  name: string;
  isTensor?: boolean;
  type?: string;
  shape?: ReadonlyArray<number | string>;
}

/** Inputs the engine knows how to feed. */
export const FED_INPUTS = ["input_ids", "attention_mask", "position_ids", "num_logits_to_keep", "use_cache_branch"];
const PER_TENSOR_QUANT = [":DynamicQuantizeLinear", "com.microsoft:DynamicQuantizeMatMul"];

/**
 * A recurrent state input, as transformers.js names them (getCacheNames/getPastKeyValues), and
 * the output paired with it (`present_conv.N`…).
 */
export const isStateInput = (name: string) => /^past_(conv|ssm|recurrent)\.\d+(\.\w+)?$/.test(name);
const stateOutputOf = (past: string) => past.replace(/^past_/, "present_");

/** A cache input (`past_key_values.N.key/value`), and the output paired with it. */
export const isPastInput = (name: string) => /^past_key_values\.\d+\.(key|value)$/.test(name);
export const presentOf = (past: string) => past.replace("past_key_values", "present");
/** The output holding a present's last position alone, when the engine added it (./last-token-outputs.ts). */
export const lastTokenOutput = (present: string) => `${present}.last_token`;

/** What a graph's operators say about how it can be batched (read before a session exists too). */
export const usesGroupQueryAttention = (graph: GraphOps) => graph.ops.has("com.microsoft:GroupQueryAttention");
export const quantizesPerTensor = (graph: GraphOps) => PER_TENSOR_QUANT.some((op) => graph.ops.has(op));

/** The MatMulNBits widths onnxruntime's CPU kernels run (1.30: others fail when the session is created). */
export const RUNNABLE_WEIGHT_BITS = [2, 4, 8];

/**
 * Refuses, before a session is made, a graph whose block-quantized weights onnxruntime's CPU
 * kernels cannot run (1-bit MatMulNBits: transformers.js' q1 / q1f16 files).
 */
export function checkWeightBits(id: string, file: string, graph: GraphOps) {
  const bits = [...graph.weightBits].filter((b) => !RUNNABLE_WEIGHT_BITS.includes(b)).sort((a, b) => a - b);
  if (bits.length)
    throw loadError(
      "unsupported_layout",
      `model ${id} (${file}) has ${bits.join(", ")}-bit MatMulNBits weights, which onnxruntime's CPU kernels do not run ` +
        `(they take ${RUNNABLE_WEIGHT_BITS.join(", ")} bits): deploy another dtype of it`,
    );
}

export function readGraphSignature(
  id: string,
  inputs: readonly ValueMeta[],
  outputs: readonly ValueMeta[],
  graph: GraphOps,
): GraphSignature {
  const refuse = (what: string) =>
    loadError("unsupported_layout", `model ${id}: ${what}; the engine serves decoder-only causal LMs with a KV cache`);
  const inputNames = inputs.map((i) => i.name);
  const outputNames = new Set(outputs.map((o) => o.name));
  const past = inputNames.filter(isPastInput);
  const stateInputs = inputs.filter((i) => isStateInput(i.name));
  const missing = ["input_ids", "attention_mask"].filter((n) => !inputNames.includes(n));
  if (past.length === 0) missing.push("past_key_values.N.key/value");
  if (missing.length) throw refuse(`the graph has no input ${missing.join(", ")} (it has ${inputNames.join(", ")})`);
  const unknown = inputNames.filter((n) => !FED_INPUTS.includes(n) && !past.includes(n) && !isStateInput(n));
  if (unknown.length)
    throw refuse(
      `graph input${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")} ${unknown.length > 1 ? "are" : "is"} not supported ` +
        `(the engine feeds ${FED_INPUTS.join(", ")}, past_key_values.N.key/value and fixed-size past_conv/past_ssm/past_recurrent states)`,
    );
  if (!outputNames.has("logits")) throw refuse(`the graph has no logits output`);

  const entries = past
    .map((name): KvEntry => {
      const present = presentOf(name);
      return {
        past: name,
        present,
        ...(outputNames.has(lastTokenOutput(present)) ? { lastToken: lastTokenOutput(present) } : {}),
      };
    })
    .sort((a, b) => layerOf(a.past) - layerOf(b.past) || a.past.localeCompare(b.past));
  const states = stateInputs
    .map((input): StateEntry => {
      const [, ...dims] = input.shape ?? [];
      if (!input.shape?.length || dims.some((d) => typeof d !== "number"))
        throw refuse(
          `state ${input.name} has shape ${JSON.stringify(input.shape ?? [])}: only states of a fixed size per row ([batch, …numbers]) are supported`,
        );
      if (input.type !== "float32" && input.type !== "float16")
        throw refuse(`state ${input.name} has type ${input.type} (float32 or float16 are supported)`);
      const sizes = dims as number[];
      return {
        past: input.name,
        present: stateOutputOf(input.name),
        dims: sizes,
        elems: sizes.reduce((a, b) => a * b, 1),
        type: input.type,
      };
    })
    .sort((a, b) => layerOf(a.past) - layerOf(b.past) || a.past.localeCompare(b.past));
  const noPresent = [...entries, ...states].filter((e) => !outputNames.has(e.present)).map((e) => e.present);
  if (noPresent.length) throw refuse(`the graph has no output ${noPresent.join(", ")} for its past inputs`);

  const meta = inputs.find((m) => m.name === entries[0].past);
  const shape = meta?.shape ?? [];
  const [, heads, , headDim] = shape;
  if (shape.length !== 4 || typeof heads !== "number" || typeof headDim !== "number")
    throw refuse(
      `KV cache shape ${JSON.stringify(shape)} is not supported (expected [batch, heads, sequence, head_dim])`,
    );
  // One head count, head size and type for every entry: the layouts keep every entry's cache in
  // buffers of one shape (models whose layers differ, such as OpenELM, are not served).
  const other = entries
    .map((e) => inputs.find((m) => m.name === e.past))
    .find((m) => m?.type !== meta?.type || m?.shape?.[1] !== heads || m?.shape?.[3] !== headDim);
  if (other)
    throw refuse(
      `${other.name} has shape ${JSON.stringify(other.shape)} (${other.type}) where ${entries[0].past} has ` +
        `${JSON.stringify(shape)} (${meta?.type}): KV caches whose layers differ in heads, head size or type are not supported`,
    );
  const kvType = meta?.type;
  if (kvType !== "float32" && kvType !== "float16")
    throw refuse(`KV cache type ${kvType} is not supported (float32 or float16)`);
  const logits = outputs.find((o) => o.name === "logits");
  const logitsType = logits?.type;
  if (logitsType !== "float32" && logitsType !== "float16")
    throw refuse(`logits type ${logitsType} is not supported (float32 or float16)`);
  const vocab = logits?.shape?.[2];

  return {
    kv: { entries, heads, headDim, type: kvType },
    states,
    logitsType,
    vocabSize: typeof vocab === "number" ? vocab : null,
    positionIds: inputNames.includes("position_ids"),
    numLogitsToKeep: inputNames.includes("num_logits_to_keep"),
    useCacheBranch: inputNames.includes("use_cache_branch"),
    groupQueryAttention: usesGroupQueryAttention(graph),
    rowsInteract: quantizesPerTensor(graph),
    batchOfOne: shape[0] === 1 || inputs.find((i) => i.name === "input_ids")?.shape?.[0] === 1,
  };
}

const layerOf = (name: string) => Number(name.split(".")[1]);
