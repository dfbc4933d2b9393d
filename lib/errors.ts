import { ZodError } from "zod";
import type { ERROR_TYPES } from "./contracts/errors";

export type ErrorType = (typeof ERROR_TYPES)[number];

export type ErrorBody = { error: { type: ErrorType; message: string; param?: string } };

/** An error the client is meant to see: it carries its HTTP status and error type. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: ErrorType,
    message: string,
    readonly param?: string,
    /** Sent with the error response (Retry-After, RateLimit-* on a 429). */
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = "ApiError";
  }
  toBody(): ErrorBody {
    return { error: { type: this.type, message: this.message, ...(this.param ? { param: this.param } : {}) } };
  }
}

export const invalidRequest = (message: string, param?: string) => new ApiError(400, "invalid_request", message, param);
export const unprocessable = (message: string, param?: string) => new ApiError(422, "invalid_request", message, param);
export const unauthorized = (message = "Missing or invalid API key.") => new ApiError(401, "unauthorized", message);
export const forbidden = (message: string) => new ApiError(403, "forbidden", message);
export const notFound = (message: string, param?: string) => new ApiError(404, "not_found", message, param);
/** A method the path does not serve; `use`: what it does ("POST", "GET or PATCH"). Send `Allow` with it. */
export const methodNotAllowed = (method: string | undefined, use: string) =>
  new ApiError(405, "invalid_request", `Method ${method} is not allowed here; use ${use}.`);
/**
 * The error of a request whose signal aborted: its reason when that is an ApiError (the key was
 * revoked meanwhile), else "the client closed the request" (499: nobody reads it).
 */
export const abortedError = (signal: AbortSignal | undefined) =>
  signal?.reason instanceof ApiError ? signal.reason : new ApiError(499, "internal", "The client closed the request.");
export const conflict = (message: string, param?: string) => new ApiError(409, "conflict", message, param);
export const rateLimited = (message: string, headers: Record<string, string>) =>
  new ApiError(429, "rate_limited", message, undefined, headers);
export const payloadTooLarge = (limit: number) =>
  new ApiError(413, "payload_too_large", `Request body is larger than the limit of ${limit} bytes.`);

/** Formats a zod path the way clients write it: `messages[0].role`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out;
}

/** The first issue of a ZodError as a 400 naming the offending parameter. */
export function fromZodError(error: ZodError, paramPrefix = ""): ApiError {
  const issue = error.issues[0];
  // An unknown field is named by its own path, so the client sees which key was not expected.
  const unknownKey = issue?.code === "unrecognized_keys" ? issue.keys.slice(0, 1) : [];
  const param = formatPath([...(paramPrefix ? [paramPrefix] : []), ...(issue?.path ?? []), ...unknownKey]);
  const message = issue ? (param ? `Invalid '${param}': ${issue.message}` : issue.message) : "Invalid request.";
  return invalidRequest(message, param || undefined);
}
