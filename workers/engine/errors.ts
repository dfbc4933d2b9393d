// Engine errors carry a stable `code` the HTTP layers map to statuses and error types.
export type EngineErrorCode =
  "invalid_request" | "context_length_exceeded" | "overloaded" | "model_not_found" | "invalid_model" | "internal";

/**
 * Why a model could not be loaded, for the API to map to a message and a deployment state:
 * - not_found: no such local folder, or no such hub repository (or revision);
 * - unauthorized: the hub answered 401 (gated or private repository, and no or a bad HF_TOKEN);
 * - forbidden: the hub answered 403 (the token's account has not been granted access);
 * - missing_dtype: the folder or repository has no graph file for the requested dtype;
 * - invalid_model: files missing or unreadable (config.json, tokenizer, a broken graph);
 * - unsupported_layout: a graph the engine cannot serve (the message names what is missing);
 * - offline: HF_HUB_OFFLINE is set and the model is not in the local cache;
 * - disk_full: no space left while downloading;
 * - network: the hub could not be reached or failed (5xx, reset connection, truncated body);
 * - cancelled: the load's AbortSignal fired;
 * - insufficient_memory: the graph would not fit in the memory left (memory-check.ts).
 */
export type ModelLoadFailure =
  | "not_found"
  | "unauthorized"
  | "forbidden"
  | "missing_dtype"
  | "invalid_model"
  | "unsupported_layout"
  | "offline"
  | "disk_full"
  | "network"
  | "cancelled"
  | "insufficient_memory";

export class EngineError extends Error {
  constructor(
    readonly code: EngineErrorCode,
    message: string,
    readonly param?: string,
    /** Set on model loading failures. */
    readonly reason?: ModelLoadFailure,
  ) {
    super(message);
    this.name = "EngineError";
  }
}

export const isEngineError = (e: unknown): e is EngineError => e instanceof EngineError;

const LOAD_CODES: Record<ModelLoadFailure, EngineErrorCode> = {
  not_found: "model_not_found",
  missing_dtype: "model_not_found",
  unauthorized: "invalid_model",
  forbidden: "invalid_model",
  invalid_model: "invalid_model",
  unsupported_layout: "invalid_model",
  offline: "internal",
  disk_full: "internal",
  network: "internal",
  cancelled: "internal",
  insufficient_memory: "internal",
};

/** A model loading failure, with the code its reason maps to. */
export function loadError(reason: ModelLoadFailure, message: string): EngineError {
  return new EngineError(LOAD_CODES[reason], message, "model", reason);
}
