// Generates the deterministic tiny GPT-2-style model folder (HF ONNX export layout).
import { mkdir, rename, rm, writeFile, cp, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { encodeWithBpe, trainBpe } from "./bpe-train";
import { CORPUS } from "./corpus";
import { buildGpt2Graph, type TinyShape } from "./gpt2-graph";
import { createRng } from "./prng";
import { tokenizerConfigJson, tokenizerJson } from "./tokenizer-files";
import { bigramLogits, makeWeights } from "./weights";

export interface TinyModelOptions {
  seed?: number;
  large?: boolean;
}

const SIZES = {
  tiny: { nEmbd: 128, nLayer: 2, nHead: 4, nPositions: 1024 },
  large: { nEmbd: 512, nLayer: 8, nHead: 8, nPositions: 1024 },
};

/** Writes the model to `dir` (created if needed). Same options, same bytes. */
export async function generateTinyModel(dir: string, opts: TinyModelOptions = {}): Promise<{ parameters: number }> {
  const seed = opts.seed ?? 42;
  const bpe = trainBpe(CORPUS, 1200);
  const eosId = bpe.vocab.size;
  const shape: TinyShape = { vocabSize: eosId + 1, ...SIZES[opts.large ? "large" : "tiny"] };
  const sequences = CORPUS.map((t) => [...encodeWithBpe(bpe, t), eosId]);
  const bigram = bigramLogits(sequences, shape.vocabSize);
  bigram.bias[eosId] -= 3; // texts end often in the corpus; keep generations from stopping at once
  const weights = makeWeights(shape, createRng(seed), bigram);
  const onnx = buildGpt2Graph(shape, weights);

  await mkdir(path.join(dir, "onnx"), { recursive: true });
  const json = (name: string, value: unknown) => writeFile(path.join(dir, name), JSON.stringify(value, null, 2) + "\n");
  await json("config.json", {
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
    _generator: { name: "model-tiny", seed, large: !!opts.large },
  });
  await json("generation_config.json", { bos_token_id: eosId, eos_token_id: eosId });
  await json("tokenizer.json", tokenizerJson(bpe, eosId));
  await json("tokenizer_config.json", tokenizerConfigJson(shape.nPositions));
  await json("special_tokens_map.json", {
    bos_token: "<|endoftext|>",
    eos_token: "<|endoftext|>",
    unk_token: "<|endoftext|>",
  });
  await writeFile(path.join(dir, "onnx", "model.onnx"), onnx);
  const parameters = onnxParameterCount(weights);
  return { parameters };
}

function onnxParameterCount(w: ReturnType<typeof makeWeights>): number {
  let n = w.wte.length + w.wpe.length + w.lnfg.length + w.lnfb.length + w.lmHead.length + w.lmBias.length;
  for (const l of w.layers) for (const a of Object.values(l)) n += a.length;
  return n;
}

/**
 * Returns a folder holding the model for these options, generated once per machine under
 * os.tmpdir() (written to a scratch folder then renamed, so concurrent test files are safe).
 */
export async function cachedTinyModel(opts: TinyModelOptions = {}): Promise<string> {
  const key = `lmp-tiny-model-v2-${opts.large ? "large" : "tiny"}-${opts.seed ?? 42}`;
  const dir = path.join(os.tmpdir(), key);
  if (await exists(path.join(dir, "onnx", "model.onnx"))) return dir;
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
