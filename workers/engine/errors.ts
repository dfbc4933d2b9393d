// Engine errors carry a stable `code` the HTTP layers map to statuses and error types.
export type EngineErrorCode =
  "invalid_request" | "context_length_exceeded" | "overloaded" | "model_not_found" | "invalid_model" | "internal";

export class EngineError extends Error {
  constructor(
    readonly code: EngineErrorCode,
    message: string,
    readonly param?: string,
  ) {
    super(message);
    this.name = "EngineError";
  }
}

export const isEngineError = (e: unknown): e is EngineError => e instanceof EngineError;
