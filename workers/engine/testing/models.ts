// Test fixtures: the generated tiny model (cached per machine) and a private copy of the
// third-party tiny-random-llama checkpoint.
import { existsSync } from "node:fs";
import { cp, mkdtemp, readFile, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { cachedTinyModel } from "@/scripts/tiny-model/generate";
import { quantizeDynamic, type DynamicQuantMode } from "@/scripts/tiny-model/quantize-dynamic";

const repoRoot = path.resolve(import.meta.dirname, "../../..");

export const tinyModelDir = (seed = 42) => cachedTinyModel({ seed });

export async function llamaModelDir(): Promise<string> {
  const src = process.env.TINY_LLAMA_DIR ?? path.resolve(repoRoot, "../shared/models/tiny-random-llama");
  if (!existsSync(path.join(src, "config.json"))) {
    throw new Error(
      `The tiny-random-llama test checkpoint is not at ${src}: the checkout must sit next to the ` +
        "workspace's shared/ folder, or TINY_LLAMA_DIR must name the checkpoint's folder.",
    );
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), "lmp-llama-"));
  await cp(src, dir, { recursive: true });
  return dir;
}

/**
 * The third-party checkpoint with its fp32 graph quantized as transformers.js' quantize.py
 * writes a repo's q8 / int8 / uint8 file (model_quantized.onnx, model_int8.onnx, model_uint8.onnx),
 * per tensor or (--per_channel) per column.
 */
export async function llamaQuantizedDir(mode: DynamicQuantMode, perChannel = false): Promise<string> {
  const dir = await llamaModelDir();
  const file = { q8: "model_quantized.onnx", int8: "model_int8.onnx", uint8: "model_uint8.onnx" }[mode];
  const fp32 = await readFile(path.join(dir, "onnx", "model.onnx"));
  await writeFile(path.join(dir, "onnx", file), quantizeDynamic(fp32, mode, perChannel));
  return dir;
}

/** The generated llama-shaped model with one graph per dtype, as a transformers.js repo ships them. */
export const llamaDtypesDir = () =>
  cachedTinyModel({ family: "llama", dtypes: ["fp32", "fp16", "q8", "int8", "uint8", "q4", "q4f16"] });

/** Generated llama variants, one per graph layout real exports use. */
export const llamaLayoutDir = (
  layout:
    | "no-position-ids"
    | "gqa"
    | "external-data"
    | "extra-inputs"
    | "q4-int8-compute"
    | "two-bit"
    | "hybrid"
    | "hybrid-no-position-ids",
) =>
  cachedTinyModel({
    family: "llama",
    ...{
      "no-position-ids": { positions: "past-length" as const },
      gqa: { attention: "gqa" as const },
      "external-data": { externalData: 2, dtypes: ["fp32" as const, "q8" as const, "q4" as const] },
      "extra-inputs": { numLogitsToKeep: true, useCacheBranch: true },
      // MatMulNBits accuracy_level 4, as onnxruntime-genai's CPU int4 exports (and the bench's q4).
      "q4-int8-compute": { dtypes: ["q4" as const], q4Accuracy: 4 },
      // 2-bit MatMulNBits (transformers.js v4.1+'s q2 and q2f16 files).
      "two-bit": { dtypes: ["q2" as const, "q2f16" as const] },
      // LFM2-style hybrid: convolution layers with a fixed-size past_conv.N state between attention layers.
      hybrid: { hybrid: true, dtypes: ["fp32" as const, "fp16" as const, "q8" as const, "q4" as const] },
      "hybrid-no-position-ids": { hybrid: true, positions: "past-length" as const },
    }[layout],
  });
