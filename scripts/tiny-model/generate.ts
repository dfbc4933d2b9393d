// Generates deterministic test models in the folder layout of a Hugging Face ONNX export:
// config.json, generation_config.json, tokenizer files and onnx/model{suffix}.onnx per dtype,
// in the graph layouts real exports use (see gpt2-graph.ts and llama-graph.ts).
import { createHash } from "node:crypto";
import { cp, mkdir, rename, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { onnxFileFor } from "../../workers/engine/model/dtypes";
import { encodeWithBpe, trainBpe } from "./bpe-train";
import { CORPUS } from "./corpus";
import { elemTypeOf, WEIGHT_FORMATS, type WeightFormat } from "./graph-parts";
import { buildGpt2Graph, type TinyShape } from "./gpt2-graph";
import { buildLlamaGraph, CONV_L, isConvLayer, STANDARD_LAYOUT, type LlamaLayout } from "./llama-graph";
import { makeLlamaWeights, type LlamaShape } from "./llama-weights";
import { FLOAT16, type EncodedModel, type ExternalDataOptions } from "./onnx-builder";
import { createRng } from "./prng";
import { tokenizerConfigJson, tokenizerJson } from "./tokenizer-files";
import { bigramLogits, makeWeights } from "./weights";

export interface TinyModelOptions {
  seed?: number;
  /**
   * gpt2 (default): the demo's GPT-2, output head fitted to the corpus' bigrams (word-like text);
   * llama: RMSNorm, rotary, grouped KV heads, random weights (see llama-weights.ts).
   */
  family?: "gpt2" | "llama";
  /** gpt2: tiny (0.8M) or large (26M); llama: tiny (0.9M) or bench (134M, the engine benchmark's). */
  size?: "tiny" | "large" | "bench";
  /** Alias of size "large" (gpt2). */
  large?: boolean;
  /** Graph files to write, one per dtype (llama only beyond fp32). Default ["fp32"]. */
  dtypes?: WeightFormat[];
  /** "past-length": no position_ids input (positions = past length + 0..S-1). */
  positions?: LlamaLayout["positions"];
  /** llama only: "gqa" = com.microsoft GroupQueryAttention, model-builder style. */
  attention?: LlamaLayout["attention"];
  numLogitsToKeep?: boolean;
  useCacheBranch?: boolean;
  /**
   * llama only: an LFM2-style hybrid (config model_type lfm2): even layers are gated short
   * convolutions with a fixed-size past_conv.N state, odd layers attention (see llama-graph.ts).
   */
  hybrid?: boolean;
  /** Weights in N external data files next to each graph (0 = inside the graph). */
  externalData?: number;
  /** MatMulNBits accuracy_level of q4 graphs (0 = unset). */
  q4Accuracy?: number;
}

const GPT2_SIZES = {
  tiny: { nEmbd: 128, nLayer: 2, nHead: 4, nPositions: 1024 },
  large: { nEmbd: 512, nLayer: 8, nHead: 8, nPositions: 1024 },
};
const LLAMA_SIZES = {
  tiny: { hidden: 128, layers: 2, heads: 4, kvHeads: 2, ffn: 256, maxPositions: 1024 },
  // Same shape as ../shared/tools/llamacpp-anchor's default model (134.1M parameters).
  bench: { hidden: 768, layers: 12, heads: 12, kvHeads: 12, ffn: 2048, maxPositions: 2048, vocabSize: 32000 },
};

function normalize(opts: TinyModelOptions) {
  const family = opts.family ?? "gpt2";
  const size = opts.size ?? (opts.large ? "large" : "tiny");
  const dtypes = [...new Set<WeightFormat>(opts.dtypes ?? ["fp32"])].sort(
    (a, b) => WEIGHT_FORMATS.indexOf(a) - WEIGHT_FORMATS.indexOf(b),
  );
  const layout: LlamaLayout = {
    attention: opts.attention ?? STANDARD_LAYOUT.attention,
    positions: opts.positions ?? STANDARD_LAYOUT.positions,
    numLogitsToKeep: opts.numLogitsToKeep ?? false,
    useCacheBranch: opts.useCacheBranch ?? false,
    hybrid: opts.hybrid ?? false,
  };
  if (family === "gpt2") {
    if (size === "bench") throw new Error("the bench size is a llama model");
    if (
      dtypes.some((d) => d !== "fp32") ||
      layout.attention !== "standard" ||
      layout.numLogitsToKeep ||
      layout.useCacheBranch ||
      layout.hybrid
    )
      throw new Error("the gpt2 family is fp32 with the standard layout (positions may be past-length)");
  } else if (size === "large") throw new Error("llama sizes are tiny and bench");
  if (layout.hybrid && layout.attention !== "standard")
    throw new Error("hybrid models use the standard attention layout");
  return {
    seed: opts.seed ?? 42,
    family,
    size,
    dtypes,
    layout,
    externalData: opts.externalData ?? 0,
    q4Accuracy: opts.q4Accuracy ?? 0,
  };
}

/** Writes the model to `dir` (created if needed). Same options, same bytes. */
export async function generateTinyModel(dir: string, opts: TinyModelOptions = {}): Promise<{ parameters: number }> {
  const o = normalize(opts);
  const bpe = trainBpe(CORPUS, 1200);
  const llama = o.family === "llama" ? { ...LLAMA_SIZES[o.size as "tiny" | "bench"] } : null;
  // EOS is the last id; a large vocabulary is filled with tokens no text encodes to.
  const vocabSize = llama && "vocabSize" in llama ? llama.vocabSize : bpe.vocab.size + 1;
  const eosId = vocabSize - 1;
  const maxPositions = llama ? llama.maxPositions : GPT2_SIZES[o.size as "tiny" | "large"].nPositions;
  const rng = createRng(o.seed);
  const external = (file: string): ExternalDataOptions | undefined =>
    o.externalData > 0
      ? { location: `${path.basename(file)}_data`, chunks: o.externalData, minBytes: 1024 }
      : undefined;

  const graphs: { file: string; encoded: EncodedModel }[] = [];
  let parameters = 0;
  let config: Record<string, unknown>;
  if (llama) {
    const shape: LlamaShape = { ...llama, vocabSize, ropeTheta: 10000, rmsEps: 1e-5 };
    const conv = o.layout.hybrid ? { layers: (l: number) => isConvLayer(o.layout, l), width: CONV_L } : undefined;
    const weights = makeLlamaWeights(shape, rng, o.size === "bench" ? "bench" : "mixing", conv);
    parameters = countParameters(weights);
    for (const dtype of o.dtypes) {
      const file = onnxFileFor(dtype);
      graphs.push({
        file,
        encoded: buildLlamaGraph(shape, weights, dtype, o.layout, {
          external: external(file),
          q4Accuracy: o.q4Accuracy,
        }),
      });
    }
    config = llamaConfig(shape, eosId);
    if (o.layout.hybrid)
      config = {
        ...config,
        architectures: ["Lfm2ForCausalLM"],
        model_type: "lfm2",
        layer_types: Array.from({ length: shape.layers }, (_, l) =>
          isConvLayer(o.layout, l) ? "conv" : "full_attention",
        ),
        conv_L_cache: CONV_L,
      };
  } else {
    const shape: TinyShape = { vocabSize, ...GPT2_SIZES[o.size as "tiny" | "large"] };
    const weights = makeWeights(shape, rng, fittedBigrams(bpe, vocabSize, eosId));
    parameters = countParameters(weights);
    const file = onnxFileFor("fp32");
    graphs.push({ file, encoded: buildGpt2Graph(shape, weights, { positions: o.layout.positions }, external(file)) });
    config = gpt2Config(shape, eosId);
  }
  const jsConfig: Record<string, unknown> = {};
  const halfCache = o.dtypes.filter((d) => elemTypeOf(d) === FLOAT16);
  if (halfCache.length) jsConfig.kv_cache_dtype = Object.fromEntries(halfCache.map((d) => [d, "float16"]));
  if (o.externalData > 0)
    jsConfig.use_external_data_format = Object.fromEntries(graphs.map((g) => [path.basename(g.file), o.externalData]));
  config = {
    ...config,
    ...(Object.keys(jsConfig).length ? { "transformers.js_config": jsConfig } : {}),
    _generator: { name: "model-tiny", ...o },
  };

  await mkdir(path.join(dir, "onnx"), { recursive: true });
  const json = (name: string, value: unknown) => writeFile(path.join(dir, name), JSON.stringify(value, null, 2) + "\n");
  await json("config.json", config);
  await json("generation_config.json", { bos_token_id: eosId, eos_token_id: eosId });
  await json("tokenizer.json", tokenizerJson(bpe, eosId));
  await json("tokenizer_config.json", tokenizerConfigJson(maxPositions));
  await json("special_tokens_map.json", {
    bos_token: "<|endoftext|>",
    eos_token: "<|endoftext|>",
    unk_token: "<|endoftext|>",
  });
  for (const { file, encoded } of graphs) {
    await writeFile(path.join(dir, file), encoded.graph);
    for (const d of encoded.data) await writeFile(path.join(dir, path.dirname(file), d.file), d.bytes);
  }
  return { parameters };
}

function fittedBigrams(bpe: ReturnType<typeof trainBpe>, vocabSize: number, eosId: number) {
  const sequences = CORPUS.map((t) => [...encodeWithBpe(bpe, t), eosId]);
  const bigram = bigramLogits(sequences, vocabSize);
  bigram.bias[eosId] -= 3; // texts end often in the corpus; keep generations from stopping at once
  return bigram;
}

function gpt2Config(shape: TinyShape, eosId: number) {
  return {
    architectures: ["GPT2LMHeadModel"],
    model_type: "gpt2",
    vocab_size: shape.vocabSize,
    n_positions: shape.nPositions,
    n_ctx: shape.nPositions,
    n_embd: shape.nEmbd,
    n_layer: shape.nLayer,
    n_head: shape.nHead,
    layer_norm_epsilon: 1e-5,
    bos_token_id: eosId,
    eos_token_id: eosId,
    use_cache: true,
  };
}

function llamaConfig(s: LlamaShape, eosId: number) {
  return {
    architectures: ["LlamaForCausalLM"],
    model_type: "llama",
    vocab_size: s.vocabSize,
    hidden_size: s.hidden,
    intermediate_size: s.ffn,
    num_hidden_layers: s.layers,
    num_attention_heads: s.heads,
    num_key_value_heads: s.kvHeads,
    head_dim: s.hidden / s.heads,
    max_position_embeddings: s.maxPositions,
    rms_norm_eps: s.rmsEps,
    rope_theta: s.ropeTheta,
    tie_word_embeddings: false,
    bos_token_id: eosId,
    eos_token_id: eosId,
    use_cache: true,
  };
}

function countParameters(w: object): number {
  let n = 0;
  const visit = (v: unknown) => {
    if (v instanceof Float32Array) n += v.length;
    else if (Array.isArray(v)) v.forEach(visit);
    else if (v && typeof v === "object") Object.values(v).forEach(visit);
  };
  visit(w);
  return n;
}

/** Cache folder name: readable prefix, then a hash of every option (so variants never collide). */
function cacheKey(opts: TinyModelOptions): string {
  const o = normalize(opts);
  const hash = createHash("sha256").update(JSON.stringify(o)).digest("hex").slice(0, 12);
  return `lmp-model-v4-${o.family}-${o.size}-${o.seed}-${hash}`;
}

/**
 * Returns a folder holding the model for these options, generated once per machine under
 * os.tmpdir() (written to a scratch folder then renamed, so concurrent test files are safe).
 */
export async function cachedTinyModel(opts: TinyModelOptions = {}): Promise<string> {
  const dir = path.join(os.tmpdir(), cacheKey(opts));
  if (await exists(path.join(dir, "config.json"))) return dir;
  const scratch = `${dir}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  await generateTinyModel(scratch, opts);
  try {
    await rename(scratch, dir);
  } catch {
    await rm(scratch, { recursive: true, force: true }); // another process won the race
  }
  return dir;
}

/** Copies the cached model into `dir` (for tests that want a private, writable copy). */
export async function copyTinyModel(dir: string, opts: TinyModelOptions = {}): Promise<string> {
  await cp(await cachedTinyModel(opts), dir, { recursive: true });
  return dir;
}

async function exists(p: string): Promise<boolean> {
  try {
    await stat(p);
    return true;
  } catch {
    return false;
  }
}
