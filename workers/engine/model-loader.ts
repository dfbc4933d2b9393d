// Loads an ONNX causal LM (local folder or hub id) with its tokenizer through transformers.js.
// Lazy and cached: the first request for a model loads it, later ones share the promise.
import {
  AutoModelForCausalLM,
  AutoTokenizer,
  type PreTrainedModel,
  type PreTrainedTokenizer,
  type Tensor,
} from "@huggingface/transformers";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { EngineError, isEngineError } from "./errors";
import { configureHfEnv } from "./hf-env";
import { readModelInfo, type ModelInfo } from "./model-info";

export type ForwardInputs = Record<string, Tensor>;
/** Output tensors as onnxruntime returns them (CPU data). */
export type ForwardOutputs = Record<string, { data: Float32Array; dims: readonly number[] }>;

interface OrtSession {
  inputNames: string[];
  outputNames: string[];
  inputMetadata?: { name: string; type?: string; shape?: (number | string)[] }[];
  run(feeds: Record<string, unknown>, fetches?: string[]): Promise<Record<string, unknown>>;
}

export interface LoadedModel {
  id: string;
  tokenizer: PreTrainedTokenizer;
  model: PreTrainedModel;
  info: ModelInfo;
  /**
   * One forward pass of the ONNX graph, fetching only `outputs` when given (counted: tests
   * assert that batching shares passes). Inputs the graph does not take are ignored.
   */
  forward(inputs: ForwardInputs, outputs?: string[]): Promise<ForwardOutputs>;
  readonly stats: { forwardCalls: number };
}

const isLocalPath = (id: string) => path.isAbsolute(id) || id.startsWith(".") || existsSync(id);

/** Checks a local folder's layout so a bad path fails with a message that says what is wrong. */
function checkLocalFolder(dir: string) {
  if (!existsSync(dir) || !statSync(dir).isDirectory())
    throw new EngineError("model_not_found", `model folder not found: ${dir}`, "model");
  for (const f of ["config.json", "tokenizer.json", "tokenizer_config.json"]) {
    if (!existsSync(path.join(dir, f)))
      throw new EngineError("invalid_model", `model folder ${dir} has no ${f}`, "model");
  }
  try {
    JSON.parse(readFileSync(path.join(dir, "config.json"), "utf8"));
  } catch (e) {
    throw new EngineError(
      "invalid_model",
      `model folder ${dir}: config.json is not valid JSON (${(e as Error).message})`,
      "model",
    );
  }
  const onnxDir = path.join(dir, "onnx");
  if (!existsSync(path.join(onnxDir, "model.onnx"))) {
    const found = existsSync(onnxDir) ? readdirSync(onnxDir).join(", ") || "nothing" : "no onnx/ folder";
    throw new EngineError("invalid_model", `model folder ${dir} has no onnx/model.onnx (found: ${found})`, "model");
  }
}

/**
 * ONNX Runtime's thread pools spin while waiting for work by default. Between decoding steps
 * (the worker is serving HTTP, the app and Postgres share the machine) that spinning burned
 * ~25% more CPU per token and took cores from everything else: the serve bench measured
 * 3.96 → 2.98 ms of worker CPU per token, 8 HTTP streams at 0.85 → 0.92 of the in-process rate.
 */
const ORT_SESSION_OPTIONS = {
  extra: { session: { intra_op: { allow_spinning: "0" }, inter_op: { allow_spinning: "0" } } },
};

export async function loadModel(id: string): Promise<LoadedModel> {
  configureHfEnv();
  const local = isLocalPath(id);
  const source = local ? path.resolve(id) : id;
  if (local) checkLocalFolder(source);
  let tokenizer: PreTrainedTokenizer;
  let model: PreTrainedModel;
  try {
    tokenizer = await AutoTokenizer.from_pretrained(source, { local_files_only: local });
    model = await AutoModelForCausalLM.from_pretrained(source, {
      dtype: "fp32",
      local_files_only: local,
      session_options: ORT_SESSION_OPTIONS,
    });
  } catch (e) {
    if (isEngineError(e)) throw e;
    throw new EngineError("invalid_model", `could not load model ${id}: ${(e as Error).message}`, "model");
  }
  const session = (model as unknown as { sessions: Record<string, OrtSession> }).sessions.model;
  if (!session) throw new EngineError("invalid_model", `model ${id} is not a decoder-only causal LM`, "model");
  const config = model.config as unknown as Record<string, unknown>;
  const generationConfig = (model.generation_config as unknown as Record<string, unknown> | null) ?? null;
  const info = readModelInfo(
    id,
    config,
    generationConfig,
    session.inputNames,
    session.inputMetadata ?? [],
    session.outputNames,
  );
  const stats = { forwardCalls: 0 };
  return {
    id,
    tokenizer,
    model,
    info,
    stats,
    async forward(inputs, outputs) {
      stats.forwardCalls++;
      // Straight to the onnxruntime session: fetching only some outputs spares copying the
      // whole KV cache out of onnxruntime at every step.
      const feeds: Record<string, unknown> = {};
      for (const name of session.inputNames) {
        const t = inputs[name] as unknown as { ort_tensor: unknown } | undefined;
        if (!t) throw new EngineError("internal", `model ${id}: missing input ${name}`);
        feeds[name] = t.ort_tensor;
      }
      return (await (outputs ? session.run(feeds, outputs) : session.run(feeds))) as ForwardOutputs;
    },
  };
}

/** Lazy cache of loaded models by id; a failed load is forgotten so it can be retried. */
export class ModelRegistry {
  private readonly models = new Map<string, Promise<LoadedModel>>();

  get(id: string): Promise<LoadedModel> {
    let p = this.models.get(id);
    if (!p) {
      p = loadModel(id);
      this.models.set(id, p);
      p.catch(() => this.models.delete(id));
    }
    return p;
  }

  loadedIds(): string[] {
    return [...this.models.keys()];
  }

  async dispose() {
    for (const p of this.models.values()) {
      const m = await p.catch(() => null);
      await m?.model.dispose();
    }
    this.models.clear();
  }
}
