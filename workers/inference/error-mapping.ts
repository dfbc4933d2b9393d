// Maps engine errors to the platform's error body and HTTP status.
import type { GenerationErrorBody } from "@/lib/contracts/generation";
import { isEngineError } from "../engine/errors";

export interface HttpError {
  status: number;
  body: GenerationErrorBody;
}

export function httpError(
  status: number,
  type: GenerationErrorBody["error"]["type"],
  message: string,
  param?: string,
): HttpError {
  return { status, body: { error: { type, message, ...(param ? { param } : {}) } } };
}

export function toHttpError(e: unknown): HttpError {
  if (isEngineError(e)) {
    switch (e.code) {
      case "invalid_request":
        return httpError(400, "invalid_request", e.message, e.param);
      case "context_length_exceeded":
        return httpError(400, "context_length_exceeded", e.message, e.param);
      case "overloaded":
        return httpError(429, "rate_limited", e.message);
      case "model_not_found":
        return httpError(404, "invalid_request", e.message, e.param ?? "model");
      default:
        return httpError(500, "internal", e.message);
    }
  }
  return httpError(500, "internal", "internal error");
}
