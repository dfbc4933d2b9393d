// Loads a causal LM for the engine: a local folder or a hub id (downloaded into the cache
// first), the graph of the requested dtype in an onnxruntime session of our own, the tokenizer
// and chat template through transformers.js, and the graph layout that will serve it.
import path from "node:path";
import type { PreTrainedTokenizer } from "@huggingface/transformers";
import { resolveChatTemplate, type ChatTemplateSource } from "../chat-template";
import { isEngineError, loadError } from "../errors";
import { isDtypeChoice, UNSUPPORTED_DTYPES, type Dtype, type DtypeChoice } from "./dtypes";
import { logger } from "@/lib/observe/log";
import { checkWeightBits, quantizesPerTensor, readGraphSignature, type GraphSignature } from "./graph-signature";
import { downloadModel } from "./hub/download";
import type { HubOptions } from "./hub/hub-config";
import { createRunner } from "./layouts";
import type { LayoutName, ModelRunner } from "./layouts/layout";
import { runsChunksOnCache, statesCarryAcrossChunks } from "./layouts/state-rows";
import { chooseGraph, isLocalPath, readModelFolder } from "./model-folder";
import {
  availableMemoryBytes,
  checkMemory,
  graphBytes,
  MiB,
  neededBytes,
  noteLoaded,
  noteReleased,
} from "./memory-check";
import { scanOnnxOps, type GraphOps } from "./onnx-scan";
import { concatenatedColumns, lastPositionHead, newColumnAt, presentsToSlice } from "./last-token-outputs";
import type { LoadProgress } from "./progress";
import { rowsIndependent, rowWisePlan } from "./row-quantization";
import { splitAttentionPlan } from "./split-attention";
import { createGraphSession, type GraphAdditions, type GraphSession, type SessionSettings } from "./session";
import { AutoTokenizer, env } from "../transformers";

export interface ModelInfo {
  contextLength: number;
  /**
   * The most characters one token stands for (its vocabulary's longest entry): a prompt longer
   * than the context times this cannot fit, and is refused without being tokenized.
   */
  maxTokenChars: number;
  eosTokenIds: number[];
  vocabSize: number;
  dtype: Dtype;
  layout: LayoutName;
  usesPositionIds: boolean;
  chatTemplate: ChatTemplateSource;
  /**
   * Why the chat template could not render a one-message conversation at load (a Jinja feature or
   * filter transformers.js lacks): chat requests then fail as the server's fault (500), not as a
   * 400 blaming the messages. Absent when it renders.
   */
  chatTemplateError?: string;
  graph: GraphSignature;
  /**
   * Whether a long prompt may be prefilled in chunks: unless the graph refuses a chunk on top of a
   * cache, or has recurrent states that its export does not carry from one chunk to the next
   * (layouts/state-rows.ts: runsChunksOnCache, statesCarryAcrossChunks, probed at load).
   */
  chunkedPrefill: boolean;
  /**
   * How this model is served slower than a model can be, and why, one sentence each, for
   * operators (a deployment's status message once ready): concurrent requests that do not share
   * passes, prompts that are not chunked, whole caches fetched each step. Empty when none applies.
   */
  servingNotes: string[];
}

export interface LoadedModel {
  id: string;
  /** The local folder the model was loaded from (a hub id's cached snapshot). */
  dir: string;
  /** The graph file, relative to `dir`. */
  graphFile: string;
  tokenizer: PreTrainedTokenizer;
  info: ModelInfo;
  runner: ModelRunner;
  /** The graph's session (layouts run it; tests feed it directly). */
  session: GraphSession;
  /** Forward passes run so far (tests assert that batching shares passes). */
  readonly stats: { forwardCalls: number };
  dispose(): Promise<void>;
}

export interface LoadModelOptions {
  /** Which graph file to load (transformers.js' names); `auto` (default): see chooseAutoDtype. */
  dtype?: DtypeChoice;
  /** Download and load progress, for the worker to publish. */
  onProgress?: (p: LoadProgress) => void;
  /** Cancels a download in progress (the partial file is kept and resumed next time). */
  signal?: AbortSignal;
  /** Hub settings; default from the environment (see hub-config.ts). */
  hub?: Partial<HubOptions>;
  /**
   * The memory left for a model, checked before its graph is loaded (memory-check.ts); default
   * the system's (availableMemoryBytes). null: no check.
   */
  availableMemory?: (() => number) | null;
  /** onnxruntime session settings (thread count); default onnxruntime's. */
  session?: SessionSettings;
  /**
   * Serve per-tensor quantized graphs (q8, int8, uint8) with row-wise quantization, so that rows
   * share passes (./row-quantization.ts; their weights then take twice the memory). Default true.
   */
  rowWiseQuantization?: boolean;
  /**
   * Let one-token passes attend over the past and the new token apart, where that is exact
   * (./split-attention.ts): no copy of the whole cache per step. Default true.
   */
  splitAttention?: boolean;
}

export async function loadModel(id: string, opts: LoadModelOptions = {}): Promise<LoadedModel> {
  const requested = opts.dtype ?? "auto";
  if (!isDtypeChoice(requested)) {
    const unsupported = Object.hasOwn(UNSUPPORTED_DTYPES, requested) ? UNSUPPORTED_DTYPES[requested] : null;
    throw unsupported
      ? loadError("unsupported_layout", `dtype ${requested} cannot be served: ${unsupported.why}`)
      : loadError("missing_dtype", `unknown dtype ${JSON.stringify(requested)}`);
  }
  // transformers.js only ever reads local files: hub downloads are ours (hub/download.ts).
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  let dir = path.resolve(id);
  let dtype = requested;
  if (!isLocalPath(id)) {
    const got = await downloadModel(id, { dtype, onProgress: opts.onProgress, signal: opts.signal, hub: opts.hub });
    dir = got.dir;
    dtype = got.dtype; // what `auto` chose among the repository's files, not just the cached ones
  }
  // One load at a time, from its memory check to its end: loads that ran side by side each saw
  // the memory none of them had taken yet, passed, and together ran the worker out of it.
  const release = await loadTurn(id, opts.signal);
  try {
    return await loadFolder(id, dir, dtype, opts);
  } finally {
    release();
  }
}

/** Loads of this process, in turn (see loadModel). */
let loadTurns: Promise<unknown> = Promise.resolve();

/** Waits for the loads before this one (or the abort); returns the release of this one's turn. */
async function loadTurn(id: string, signal: AbortSignal | undefined): Promise<() => void> {
  let release!: () => void;
  const mine = new Promise<void>((r) => (release = r));
  const before = loadTurns;
  loadTurns = before.then(() => mine);
  try {
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => reject(loadError("cancelled", `load of ${id} cancelled`));
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      void before.then(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      });
    });
  } catch (e) {
    release();
    throw e;
  }
  return release;
}

async function loadFolder(id: string, dir: string, dtype: DtypeChoice, opts: LoadModelOptions): Promise<LoadedModel> {
  const folder = readModelFolder(dir, id);
  const choice = chooseGraph(id, folder.onnxFiles, dtype, folder.config);
  let graphOps: GraphOps;
  try {
    graphOps = scanOnnxOps(path.join(dir, choice.graph));
  } catch (e) {
    throw loadError("invalid_model", `could not load model ${id} (${choice.graph}): ${(e as Error).message}`);
  }
  checkWeightBits(id, choice.graph, graphOps);
  const rowWiseWanted = opts.rowWiseQuantization ?? true;
  const additions = additionsFor(graphOps, rowWiseWanted, opts.splitAttention ?? true);
  // Why a per-tensor quantized graph's rows run one pass each, when they do.
  let aloneBecause = !quantizesPerTensor(graphOps)
    ? null
    : !rowWiseWanted
      ? "row-wise quantization is off (WORKER_ROW_QUANTIZATION=off)"
      : !additions.rowWise
        ? "its quantized products cannot be rewritten row by row"
        : null;
  const weights = graphBytes(dir, [choice.graph, ...choice.data]);
  if (opts.availableMemory !== null) {
    const available = (opts.availableMemory ?? availableMemoryBytes)();
    // Row-wise quantization has onnxruntime keep the weights twice (row-quantization.ts). A model
    // with room for them once is served without it (one row per pass) rather than refused.
    if (additions.rowWise && neededBytes(2 * weights) > available && neededBytes(weights) <= available) {
      additions.rowWise = null;
      aloneBecause =
        `holding its weights twice for row-wise quantization would need about ${MiB(neededBytes(2 * weights))} ` +
        `of memory, and ${MiB(available)} is available`;
      logger().warn(
        { model: id, graph: choice.graph },
        `each row of this graph will run a pass of its own: ${aloneBecause}`,
      );
    }
    const halfPrecision = /16$/.test(choice.dtype); // fp16, q4f16, q2f16
    checkMemory(id, choice.graph, weights * (additions.rowWise ? 2 : 1), available, halfPrecision ? 2 : 1);
  }
  opts.onProgress?.({ state: "loading", dtype: choice.dtype });

  let tokenizer: PreTrainedTokenizer;
  let session: GraphSession | undefined;
  try {
    tokenizer = await AutoTokenizer.from_pretrained(dir, { local_files_only: true });
    session = await createGraphSession(path.join(dir, choice.graph), opts.session, additions);
  } catch (e) {
    if (isEngineError(e)) throw e;
    throw loadError("invalid_model", `could not load model ${id} (${choice.graph}): ${(e as Error).message}`);
  }
  try {
    const chat = resolveChatTemplate(dir);
    (tokenizer as { chat_template: unknown }).chat_template = chat.template;
    const chatTemplateError = probeChatTemplate(tokenizer);
    let sig = readGraphSignature(id, session.inputs, session.outputs, graphOps);
    const { config, generationConfig } = folder;
    const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);
    // transformers.js generate()'s EOS source (generation_config first, then config), and the
    // tokenizer's own (endOfSequence).
    const eosRaw = generationConfig?.eos_token_id ?? config.eos_token_id;
    const vocabSize = sig.vocabSize ?? num(config.vocab_size);
    if (!vocabSize)
      throw loadError("invalid_model", `model ${id}: no vocabulary size (logits shape or config.vocab_size)`);
    if (additions.rowWise && !session.rowWise) aloneBecause = "onnxruntime refused the row-wise version of its graph";
    if (session.rowWise) {
      // Rows quantized one by one share passes, once the model shows that they do not interact.
      const rowWiseSig = { ...sig, rowsInteract: false };
      const independent = await rowsIndependent(createRunner(rowWiseSig, session, vocabSize), vocabSize).catch(
        (err: unknown) => {
          logger().warn(
            { err, model: id, graph: choice.graph },
            "a pass of two rows failed with row-wise quantization",
          );
          return false;
        },
      );
      if (independent) sig = rowWiseSig;
      else {
        aloneBecause = "row-wise quantization did not give each row its own numbers";
        logger().warn(
          { model: id, graph: choice.graph },
          "row-wise quantization did not give each row its own numbers; each row runs a pass of its own",
        );
        // Released first: the two sessions together would hold the weights three times.
        await session.dispose();
        session = undefined;
        session = await createGraphSession(path.join(dir, choice.graph), opts.session, { ...additions, rowWise: null });
      }
    }
    const runner = createRunner(sig, session, vocabSize);
    // A graph that refuses chunks on a cache is not probed for its states across chunks.
    const chunksOnCache = await session.quietly(() => runsChunksOnCache(runner, vocabSize));
    const chunkedPrefill =
      chunksOnCache && (sig.states.length === 0 || (await statesCarryAcrossChunks(runner, sig.states, vocabSize)));
    const servingNotes = [
      ...(aloneBecause ? [`Concurrent requests run one pass each: ${aloneBecause}.`] : []),
      ...(!aloneBecause && sig.batchOfOne
        ? ["Concurrent requests run one pass each: the graph fixes its batch size at 1."]
        : []),
      ...(runner.layout === "exact-length" && !sig.positionIds && !aloneBecause && !sig.batchOfOne
        ? ["Only concurrent requests at equal lengths share a pass: the graph takes no position_ids."]
        : []),
      ...(chunkedPrefill
        ? []
        : [
            "Each prompt runs in one pass, not in chunks, so a long prompt holds up the other requests while it " +
              (chunksOnCache
                ? "runs: a prompt computed in two chunks did not match it in one at load (an export that does not " +
                  "carry its recurrent states from one chunk to the next, or quantizes each pass with one scale)."
                : "runs: the graph refused a prompt chunk on top of a cache at load (its causal mask is built for a " +
                  "prompt from the start or for one token at a time)."),
          ]),
      ...(session.unchanged
        ? ["Each step fetches the whole cache: the engine could not add its last-token outputs to the graph."]
        : []),
      ...(chatTemplateError
        ? [
            `Chat requests (messages) fail: the model's chat template cannot be rendered here (${chatTemplateError}); ` +
              "prompts work.",
          ]
        : []),
    ];
    const info: ModelInfo = {
      contextLength: num(config.max_position_embeddings) ?? num(config.n_positions) ?? num(config.n_ctx) ?? 2048,
      maxTokenChars: longestToken(tokenizer),
      eosTokenIds: endOfSequence(eosRaw, tokenizer, vocabSize),
      vocabSize,
      dtype: choice.dtype,
      layout: runner.layout,
      usesPositionIds: sig.positionIds,
      chatTemplate: chat.source,
      ...(chatTemplateError ? { chatTemplateError } : {}),
      graph: sig,
      chunkedPrefill,
      servingNotes,
    };
    opts.onProgress?.({ state: "ready", dtype: choice.dtype });
    const s = session;
    noteLoaded(weights);
    let released = false;
    return {
      id,
      dir,
      graphFile: choice.graph,
      tokenizer,
      info,
      runner,
      session: s,
      stats: s.stats,
      dispose: async () => {
        if (released) return;
        released = true;
        noteReleased(weights);
        await s.dispose();
      },
    };
  } catch (e) {
    await session?.dispose();
    throw e;
  }
}

/** What the engine adds to a graph at load (see createGraphSession). */
function additionsFor(graph: GraphOps, rowWise: boolean, split: boolean): GraphAdditions {
  const columnAt = newColumnAt(graph);
  const presents = presentsToSlice(graph);
  const concatenated = concatenatedColumns(graph, presents);
  return {
    lastTokenOf: presents,
    concatenated,
    split: split && !columnAt ? splitAttentionPlan(graph, concatenated) : null,
    head: lastPositionHead(graph),
    columnAt,
    // A GroupQueryAttention graph's column Gather reads seqlens_k, which the If's branches would hide.
    rowWise: rowWise && quantizesPerTensor(graph) && !columnAt ? rowWisePlan(graph) : null,
  };
}

/**
 * A model's tokenizer with the chat template the engine would use, without a graph session: for
 * counting tokens (the packager). A hub id is fetched into the cache like loadModel does.
 */
export async function loadTokenizer(
  id: string,
  opts: Pick<LoadModelOptions, "signal" | "hub"> = {},
): Promise<{ dir: string; tokenizer: PreTrainedTokenizer; chatTemplate: ChatTemplateSource }> {
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  // A hub id: the tokenizer's files only (a model already downloaded in any dtype has them).
  const dir = isLocalPath(id)
    ? path.resolve(id)
    : (await downloadModel(id, { dtype: "auto", tokenizerOnly: true, ...opts })).dir;
  let tokenizer: PreTrainedTokenizer;
  try {
    tokenizer = await AutoTokenizer.from_pretrained(dir, { local_files_only: true });
  } catch (e) {
    throw loadError("invalid_model", `could not load the tokenizer of ${id}: ${(e as Error).message}`);
  }
  const chat = resolveChatTemplate(dir);
  (tokenizer as { chat_template: unknown }).chat_template = chat.template;
  return { dir, tokenizer, chatTemplate: chat.source };
}

/**
 * The longest vocabulary entry, in UTF-16 units (at least 8). Each entry stands for at most as
 * many characters of text: a SentencePiece "▁" is one space, a byte-level BPE symbol one byte
 * (no more than one character), a byte-fallback "<0x41>" one byte.
 */
function longestToken(tokenizer: PreTrainedTokenizer): number {
  const vocab = tokenizer.get_vocab() as Map<string, number> | Record<string, number>;
  let longest = 8;
  for (const token of vocab instanceof Map ? vocab.keys() : Object.keys(vocab))
    if (token.length > longest) longest = token.length;
  return longest;
}

/**
 * The tokens that end a generation: generation_config's (or config's) eos_token_id, as
 * transformers.js generate() reads it, and the tokenizer's eos token, as vLLM and llama.cpp add
 * it. They differ in real exports (a chat model whose config names the base model's end of text
 * while its turns end with the tokenizer's end of turn, as early Llama 3 Instruct exports did):
 * with the config's alone, such a model ran past its answer into an invented next turn, and a
 * `stop` string could not help (special tokens are not in the text).
 */
function endOfSequence(configured: unknown, tokenizer: PreTrainedTokenizer, vocabSize: number): number[] {
  const ids = (Array.isArray(configured) ? configured : [configured]).filter((v): v is number => typeof v === "number");
  const own = (tokenizer as { eos_token_id?: unknown }).eos_token_id;
  if (typeof own === "number" && own >= 0 && own < vocabSize && !ids.includes(own)) ids.push(own);
  return ids;
}

/**
 * Renders a one-message conversation with the model's template, and one with a system message
 * first (a template may insist on either): the first error's message when both fail.
 */
function probeChatTemplate(tokenizer: PreTrainedTokenizer): string | undefined {
  const conversations = [
    [{ role: "user", content: "Hello" }],
    [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Hello" },
    ],
  ];
  let first: string | undefined;
  for (const messages of conversations) {
    try {
      tokenizer.apply_chat_template(messages, { tokenize: false, add_generation_prompt: true });
      return undefined;
    } catch (e) {
      first ??= (e as Error).message;
    }
  }
  return first;
}
