// The dtypes of transformers.js model repos: which ONNX file each names, and which one `auto` picks.
import { DTYPE_CHOICES, UNSERVED_DTYPES, type DtypeChoice } from "@/lib/contracts/models";

export type { DtypeChoice };
export type Dtype = Exclude<DtypeChoice, "auto">;
/** The dtypes a deployment may name (lib/contracts/models.ts), `auto` aside. */
export const DTYPES: readonly Dtype[] = DTYPE_CHOICES.filter((d): d is Dtype => d !== "auto");

/** transformers.js' DEFAULT_DTYPE_SUFFIX_MAPPING (v4): onnx/model{suffix}.onnx. */
export const DTYPE_SUFFIX: Record<Dtype, string> = {
  fp32: "",
  fp16: "_fp16",
  q8: "_quantized",
  int8: "_int8",
  uint8: "_uint8",
  q4: "_q4",
  q4f16: "_q4f16",
  bnb4: "_bnb4",
  q2: "_q2",
  q2f16: "_q2f16",
};

/** onnx/<base><suffix>.onnx: transformers.js' graph file name. */
const graphFile = (suffix: string, base = "model") => `onnx/${base}${suffix}.onnx`;

/** The dtypes the engine cannot run (lib/contracts' UNSERVED_DTYPES), with their graph file and why. */
export const UNSUPPORTED_DTYPES: Record<string, { file: string; why: string }> = Object.fromEntries(
  Object.entries(UNSERVED_DTYPES).map(([d, why]) => [d, { file: graphFile(`_${d}`), why }]),
);

export const isDtype = (v: unknown): v is Dtype => typeof v === "string" && (DTYPES as readonly string[]).includes(v);
export const isDtypeChoice = (v: unknown): v is DtypeChoice => v === "auto" || isDtype(v);

/** The graph file of `dtype`, relative to the model folder. */
export const onnxFileFor = (dtype: Dtype, base = "model") => graphFile(DTYPE_SUFFIX[dtype], base);

/** Dtypes whose graph file is among `files` (paths relative to the model folder). */
export function availableDtypes(files: readonly string[], base = "model"): Dtype[] {
  const present = new Set(files);
  return DTYPES.filter((d) => present.has(onnxFileFor(d, base)));
}

/**
 * External data files of a graph: `<file>_data`, then `<file>_data_1`, `_2`… as exports name them
 * when the weights are split (transformers.js' getExternalDataChunkNames).
 */
export function externalDataFiles(onnxFile: string, files: readonly string[]): string[] {
  const present = new Set(files);
  const out: string[] = [];
  for (let i = 0; ; i++) {
    const name = `${onnxFile}_data${i === 0 ? "" : `_${i}`}`;
    if (!present.has(name)) return out;
    out.push(name);
  }
}

/**
 * What `auto` prefers, best first, among the graph files a model ships (see docs/api.md,
 * "dtype"; figures from `npm run bench -- engine` on this project's 2-core machines).
 */
export const AUTO_PREFERENCE: readonly Dtype[] = [
  "q8",
  "int8",
  "uint8",
  "q4",
  "fp32",
  "fp16",
  "q4f16",
  "bnb4",
  "q2",
  "q2f16",
];

/**
 * Resolves `auto`: the publisher's choice in config.json (transformers.js_config.dtype, as
 * transformers.js honours it) when that file exists, else the first of AUTO_PREFERENCE present.
 */
export function chooseAutoDtype(available: readonly Dtype[], configDtype: unknown): Dtype | null {
  if (isDtype(configDtype) && available.includes(configDtype)) return configDtype;
  return AUTO_PREFERENCE.find((d) => available.includes(d)) ?? null;
}
