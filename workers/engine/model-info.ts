// What the engine needs to know about a loaded causal LM, read from its config and ONNX inputs.
import { EngineError } from "./errors";

export interface KvLayout {
  /**
   * Input names past_key_values.N.key/value, in layer order, with their output (present) names
   * and, when the graph offers them, outputs holding only the new tokens' keys/values.
   */
  entries: { past: string; present: string; delta?: string }[];
  /** Elements per token per entry (heads × head_dim). */
  rowSize: number;
  heads: number;
  headDim: number;
}

export interface ModelInfo {
  contextLength: number;
  eosTokenIds: number[];
  usesPositionIds: boolean;
  kv: KvLayout;
}

interface InputMeta {
  name: string;
  type?: string;
  shape?: ReadonlyArray<number | string>;
}

export function readModelInfo(
  id: string,
  config: Record<string, unknown>,
  generationConfig: Record<string, unknown> | null,
  inputNames: string[],
  inputMetadata: InputMeta[],
  outputNames: string[] = [],
): ModelInfo {
  const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);
  const contextLength = num(config.max_position_embeddings) ?? num(config.n_positions) ?? num(config.n_ctx) ?? 2048;
  // Same EOS source as transformers.js generate(): generation_config first, then config.
  const eosRaw = generationConfig?.eos_token_id ?? config.eos_token_id;
  const eosTokenIds = (Array.isArray(eosRaw) ? eosRaw : [eosRaw]).filter((v): v is number => typeof v === "number");

  const pastNames = inputNames.filter((n) => n.startsWith("past_key_values."));
  if (!inputNames.includes("input_ids") || !inputNames.includes("attention_mask") || pastNames.length === 0) {
    throw new EngineError(
      "invalid_model",
      `model ${id}: expected inputs input_ids, attention_mask and past_key_values.N.key/value (a causal LM exported with a KV cache)`,
    );
  }
  if (!inputNames.includes("position_ids")) {
    // The batch cache places tokens at arbitrary physical columns and relies on explicit positions.
    throw new EngineError("invalid_model", `model ${id}: graphs without a position_ids input are not supported`);
  }
  const entries = pastNames.map((past) => {
    const delta = past.replace("past_key_values", "kv_delta");
    return {
      past,
      present: past.replace("past_key_values", "present"),
      ...(outputNames.includes(delta) ? { delta } : {}),
    };
  });
  const meta = inputMetadata.find((m) => m.name === pastNames[0]);
  const shape = meta?.shape ?? [];
  const heads = shape[1];
  const headDim = shape[3];
  if (shape.length !== 4 || typeof heads !== "number" || typeof headDim !== "number") {
    throw new EngineError(
      "invalid_model",
      `model ${id}: unsupported KV cache shape ${JSON.stringify(shape)} (expected [batch, heads, seq, head_dim])`,
    );
  }
  if (meta?.type && meta.type !== "float32") {
    throw new EngineError("invalid_model", `model ${id}: KV cache type ${meta.type} is not supported (float32 only)`);
  }
  return {
    contextLength,
    eosTokenIds,
    usesPositionIds: inputNames.includes("position_ids"),
    kv: { entries, rowSize: heads * headDim, heads, headDim },
  };
}
