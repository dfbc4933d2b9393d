import { z } from "zod";

/** The `type` of every error body (ARCHITECTURE.md "Error body"). */
export const ERROR_TYPES = [
  "invalid_request",
  "unauthorized",
  "forbidden",
  "not_found",
  "conflict",
  "payload_too_large",
  "rate_limited",
  "context_length_exceeded",
  "internal",
] as const;

/** The `error` object of an error body (also a refused item of add-batch or line of an import). */
export const ErrorObjectSchema = z.object({
  type: z.enum(ERROR_TYPES),
  message: z.string(),
  /** The offending field, as a client writes it: `messages[0].content`. */
  param: z.string().optional(),
});

export const ErrorBodySchema = z.object({ error: ErrorObjectSchema });
