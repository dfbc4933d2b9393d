// A model folder in the transformers.js layout: config.json, the tokenizer files, and one graph
// per dtype under onnx/ (plus external data). Checks it and picks the graph of a dtype.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { isHubId } from "@/lib/contracts/models";
import { loadError } from "../errors";
import {
  availableDtypes,
  chooseAutoDtype,
  DTYPE_SUFFIX,
  externalDataFiles,
  onnxFileFor,
  UNSUPPORTED_DTYPES,
  type Dtype,
  type DtypeChoice,
} from "./dtypes";

export interface ModelFolder {
  dir: string;
  config: Record<string, unknown>;
  generationConfig: Record<string, unknown> | null;
  /** Files under onnx/, as "onnx/<name>". */
  onnxFiles: string[];
}

/**
 * A path (absolute, ./relative, or an existing folder that is not shaped like a hub id) rather
 * than a hub id. `org/name` is the hub's even when a folder of that name exists where the worker
 * runs: a team's deployment cannot reach into the worker's own folders by naming them so (the
 * CLI makes its relative paths absolute; WORKER_MODELS likewise, in the worker's env).
 */
export const isLocalPath = (id: string) =>
  path.isAbsolute(id) || id.startsWith(".") || (!isHubId(id) && existsSync(id));

export const REQUIRED_FILES = ["config.json", "tokenizer.json", "tokenizer_config.json"];

function readJson(dir: string, file: string, id: string): Record<string, unknown> {
  try {
    return JSON.parse(readFileSync(path.join(dir, file), "utf8")) as Record<string, unknown>;
  } catch (e) {
    throw loadError("invalid_model", `model ${id}: ${file} is not valid JSON (${(e as Error).message})`);
  }
}

export function readModelFolder(dir: string, id: string): ModelFolder {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw loadError("not_found", `model folder not found: ${dir}`);
  for (const f of REQUIRED_FILES) {
    if (!existsSync(path.join(dir, f))) throw loadError("invalid_model", `model folder ${dir} has no ${f}`);
  }
  const config = readJson(dir, "config.json", id);
  const generationConfig = existsSync(path.join(dir, "generation_config.json"))
    ? readJson(dir, "generation_config.json", id)
    : null;
  const onnxDir = path.join(dir, "onnx");
  const onnxFiles = existsSync(onnxDir) ? readdirSync(onnxDir).map((f) => `onnx/${f}`) : [];
  return { dir, config, generationConfig, onnxFiles };
}

/**
 * "onnx/model.onnx (fp32), onnx/model_q4.onnx (q4)", files of dtypes the engine cannot run with
 * why ("onnx/model_q1.onnx (q1: 1-bit …)"), or why there is nothing.
 */
export function describeGraphs(files: readonly string[]): string {
  const graphs = files.filter((f) => f.startsWith("onnx/") && f.endsWith(".onnx"));
  if (graphs.length === 0)
    return files.some((f) => f.startsWith("onnx/")) ? "no .onnx file in onnx/" : "no onnx/ folder";
  return graphs
    .map((f) => {
      const dtype = (Object.keys(DTYPE_SUFFIX) as Dtype[]).find((d) => onnxFileFor(d) === f);
      if (dtype) return `${f} (${dtype})`;
      return unsupportedGraph(f) ?? f;
    })
    .join(", ");
}

/** "onnx/model_q1.onnx (q1: 1-bit …)" for the graph file of a dtype the engine cannot run, else null. */
export function unsupportedGraph(file: string): string | null {
  const hit = Object.entries(UNSUPPORTED_DTYPES).find(([, u]) => u.file === file);
  return hit ? `${file} (${hit[0]}: ${hit[1].why})` : null;
}

export interface GraphChoice {
  dtype: Dtype;
  /** Relative to the model folder. */
  graph: string;
  data: string[];
}

/**
 * The graph to load for `requested` among `files` (relative paths). A dtype the model lacks is
 * refused with the files it has.
 */
export function chooseGraph(
  id: string,
  files: readonly string[],
  requested: DtypeChoice,
  config: Record<string, unknown>,
): GraphChoice {
  const available = availableDtypes(files);
  const jsConfig = (config["transformers.js_config"] ?? {}) as Record<string, unknown>;
  if (available.length === 0) {
    const unsupported = files.some((f) => unsupportedGraph(f) !== null);
    throw loadError(
      unsupported ? "unsupported_layout" : "invalid_model",
      unsupported
        ? `model ${id} has no graph this engine can run; it has: ${describeGraphs(files)}`
        : `model ${id} has no ONNX graph (onnx/model.onnx, or onnx/model_<dtype>.onnx); it has: ${describeGraphs(files)}`,
    );
  }
  const dtype = requested === "auto" ? chooseAutoDtype(available, jsConfig.dtype)! : requested;
  if (!available.includes(dtype))
    throw loadError(
      "missing_dtype",
      `model ${id} has no ${onnxFileFor(dtype)} (dtype ${dtype}); it has: ${describeGraphs(files)}`,
    );
  const graph = onnxFileFor(dtype);
  return { dtype, graph, data: externalDataFiles(graph, files) };
}
