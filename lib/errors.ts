import { ZodError } from "zod";

export type ErrorType =
  | "invalid_request"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "conflict"
  | "payload_too_large"
  | "rate_limited"
  | "context_length_exceeded"
  | "internal";

export type ErrorBody = { error: { type: ErrorType; message: string; param?: string } };

/** An error the client is meant to see: it carries its HTTP status and error type. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: ErrorType,
    message: string,
    readonly param?: string,
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
export const conflict = (message: string, param?: string) => new ApiError(409, "conflict", message, param);
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
