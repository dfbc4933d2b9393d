// The model's onnxruntime session, created by the engine itself (transformers.js loads the
// tokenizer; the graph runs here) so that feeds and pre-allocated outputs are onnxruntime-node's
// own tensors: outputs given to run() are written in place (transformers.js' bundled tensor
// class fails onnxruntime-common's instanceof check, and such outputs were silently ignored).
import path from "node:path";
import * as ort from "onnxruntime-node";
import { logger } from "@/lib/observe/log";
import { servedModel, type HeadInput } from "./last-token-outputs";
import type { RowWisePlan } from "./row-quantization";
import { SPLIT_INPUT, splitIsExact, type SplitAttentionPlan } from "./split-attention";
import type { ValueMeta } from "./graph-signature";

export type OrtTensor = ort.Tensor;
export type KvArray = Float32Array | Uint16Array;

/**
 * ONNX Runtime's thread pools spin while waiting for work by default. Between decoding steps
 * (the worker is serving HTTP, the app and Postgres share the machine) that spinning burned
 * ~25% more CPU per token and took cores from everything else: the serve bench measured
 * 3.96 → 2.98 ms of worker CPU per token, 8 HTTP streams at 0.85 → 0.92 of the in-process rate.
 */
const SESSION_OPTIONS: ort.InferenceSession.SessionOptions = {
  executionProviders: ["cpu"],
  graphOptimizationLevel: "all",
  extra: { session: { intra_op: { allow_spinning: "0" }, inter_op: { allow_spinning: "0" } } },
};

export interface SessionSettings {
  /** onnxruntime's intra-op threads (the calling thread included); default one per physical core. */
  threads?: number;
}

export function sessionOptions(settings: SessionSettings = {}): ort.InferenceSession.SessionOptions {
  return { ...SESSION_OPTIONS, ...(settings.threads ? { intraOpNumThreads: settings.threads } : {}) };
}

export interface GraphSession {
  readonly inputs: readonly ValueMeta[];
  readonly outputs: readonly ValueMeta[];
  /** Whether the graph runs with row-wise activation quantization (./row-quantization.ts). */
  readonly rowWise: boolean;
  /** Whether additions were asked for but onnxruntime refused them: the file is served as it is. */
  readonly unchanged: boolean;
  /** Whether one-token passes over an even past skip the cache's Concat (./split-attention.ts). */
  readonly splitAttention: boolean;
  /**
   * One forward pass. `fetches` maps output names to null (allocated by onnxruntime) or to a
   * tensor written in place (results then omit it). Counted: tests assert batching shares passes.
   */
  run(feeds: Record<string, OrtTensor>, fetches: Record<string, OrtTensor | null>): Promise<Record<string, OrtTensor>>;
  /** Passes run, and of them those that took split attention. */
  readonly stats: { forwardCalls: number; splitPasses: number };
  /**
   * Runs `probe` with onnxruntime's error log silenced for its passes: a load-time probe whose
   * passes may fail by design would otherwise print an error line at every load.
   */
  quietly<T>(probe: () => Promise<T>): Promise<T>;
  dispose(): Promise<void>;
}

/** What the engine adds to a graph at load (none by default: the file is loaded as it is). */
export interface GraphAdditions {
  /** Present outputs to add the new columns of (./last-token-outputs.ts). */
  lastTokenOf?: readonly string[];
  /** The language-model head whose input is sliced to the last position. */
  head?: HeadInput | null;
  /**
   * Of lastTokenOf, the presents whose new columns are a Concat's input already (present →
   * that tensor, ./last-token-outputs.ts concatenatedColumns): exposed as they are, not sliced.
   */
  concatenated?: ReadonlyMap<string, string>;
  /** With lastTokenOf: each row's column at this tensor's index rather than the last one. */
  columnAt?: string | null;
  /** Row-wise activation quantization (./row-quantization.ts). */
  rowWise?: RowWisePlan | null;
  /** Attention products split at the past/new boundary (./split-attention.ts), row-wise or not. */
  split?: SplitAttentionPlan | null;
}

/**
 * A session of the graph in `file`, with the additions asked for: those graphs are loaded from
 * memory, their weights still read from the file (and its external data files) in the file's
 * folder. If onnxruntime refuses the graph with row-wise quantization, it is loaded without it;
 * if it refuses the other additions too, the file is loaded unchanged.
 */
export async function createGraphSession(
  file: string,
  settings: SessionSettings = {},
  additions: GraphAdditions = {},
): Promise<GraphSession> {
  const { lastTokenOf = [], head = null, columnAt = null, rowWise = null, concatenated, split = null } = additions;
  const options = sessionOptions(settings);
  const fromMemory = (plan: RowWisePlan | null, splitPlan: SplitAttentionPlan | null = null) =>
    ort.InferenceSession.create(servedModel(file, lastTokenOf, head, columnAt, plan, concatenated, splitPlan), {
      ...options,
      extra: {
        ...options.extra,
        session: {
          ...(options.extra?.session as object),
          model_external_initializers_file_folder_path: path.dirname(path.resolve(file)),
        },
      },
    });
  // The additions asked for, then fewer of them as onnxruntime refuses them.
  const attempts: { rowWise: RowWisePlan | null; split: SplitAttentionPlan | null; refused: string }[] = [];
  if (rowWise && split)
    attempts.push({ rowWise, split, refused: "could not split the attention of the row-wise graph; trying without" });
  if (rowWise)
    // Served as before: one row per pass.
    attempts.push({
      rowWise,
      split: null,
      refused: "could not add row-wise quantization to the graph; its rows will run one per pass",
    });
  if (split)
    attempts.push({
      rowWise: null,
      split,
      refused: "could not split the graph's attention; decoding steps keep the cache's Concat",
    });
  if (lastTokenOf.length > 0 || head)
    // Served as it is (each step then fetches the whole cache, each prompt all its logits): slower, never wrong.
    attempts.push({
      rowWise: null,
      split: null,
      refused:
        "could not add the engine's outputs (last-token cache, last-position logits) to the graph; loading it unchanged",
    });
  let session: ort.InferenceSession | undefined;
  let rowWiseLoaded = false;
  let splitLoaded: SplitAttentionPlan | null = null;
  for (const attempt of attempts) {
    try {
      session = await fromMemory(attempt.rowWise, attempt.split);
      rowWiseLoaded = attempt.rowWise !== null;
      splitLoaded = attempt.split;
      break;
    } catch (err) {
      logger().warn({ err, file }, attempt.refused);
    }
  }
  if (session && splitLoaded && !(await splitIsExact(session, splitLoaded))) {
    // Kept (its Ifs cost microseconds), but every pass takes the file's own nodes.
    splitLoaded = null;
    logger().info({ file }, "split attention is not exact here; decoding steps keep the cache's Concat");
  }
  const unchanged = !session && (lastTokenOf.length > 0 || head !== null);
  session ??= await ort.InferenceSession.create(file, options);
  const meta = (m: ort.InferenceSession.ValueMetadata): ValueMeta =>
    m.isTensor ? { name: m.name, isTensor: true, type: m.type, shape: m.shape } : { name: m.name, isTensor: false };
  const stats = { forwardCalls: 0, splitPasses: 0 };
  let quiet = 0;
  const hasSplitInput = session.inputNames.includes(SPLIT_INPUT);
  const splitPresents = new Set(splitLoaded ? [...splitLoaded.keys, ...splitLoaded.values].map((x) => x.present) : []);
  // The split where it is exact and its presents are not wanted: one token over an even past.
  const takesSplit = (feeds: Record<string, OrtTensor>, fetches: Record<string, OrtTensor | null>) =>
    splitLoaded !== null &&
    feeds.input_ids?.dims[1] === 1 &&
    (feeds[splitLoaded.past]?.dims[2] ?? 1) % 2 === 0 &&
    !Object.keys(fetches).some((f) => splitPresents.has(f));
  return {
    inputs: session.inputMetadata.filter((m) => m.name !== SPLIT_INPUT).map(meta),
    outputs: session.outputMetadata.map(meta),
    rowWise: rowWiseLoaded,
    unchanged,
    splitAttention: splitLoaded !== null,
    stats,
    async run(feeds, fetches) {
      stats.forwardCalls++;
      const split = takesSplit(feeds, fetches);
      if (split) stats.splitPasses++;
      const all = hasSplitInput ? { ...feeds, [SPLIT_INPUT]: boolTensor(split) } : feeds;
      // Severity 4: fatal only.
      return (await session.run(all, fetches, quiet > 0 ? { logSeverityLevel: 4 } : {})) as Record<string, OrtTensor>;
    },
    async quietly(probe) {
      quiet++;
      try {
        return await probe();
      } finally {
        quiet--;
      }
    },
    dispose: () => session.release(),
  };
}

export function int64Tensor(values: ArrayLike<number>, dims: number[]) {
  const data = new BigInt64Array(values.length);
  for (let i = 0; i < values.length; i++) data[i] = BigInt(values[i]);
  return new ort.Tensor("int64", data, dims);
}

/** An all-ones [rows, width] attention mask. */
export const onesMask = (rows: number, width: number) =>
  new ort.Tensor("int64", new BigInt64Array(rows * width).fill(1n), [rows, width]);

/** A tensor over `data` itself (no copy: onnxruntime reads the JS memory). */
export const int64View = (data: BigInt64Array, dims: number[]) => new ort.Tensor("int64", data, dims);

export const boolTensor = (value: boolean) => new ort.Tensor("bool", Uint8Array.of(value ? 1 : 0), [1]);

export function kvTensor(type: "float32" | "float16", data: KvArray, dims: number[]): OrtTensor {
  return type === "float32"
    ? new ort.Tensor("float32", data as Float32Array, dims)
    : new ort.Tensor("float16", data as Uint16Array, dims);
}

export const newKvArray = (type: "float32" | "float16", length: number): KvArray =>
  type === "float32" ? new Float32Array(length) : new Uint16Array(length);
