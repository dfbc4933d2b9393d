import { z } from "zod";
import type { ZodOpenApiOperationObject, ZodOpenApiResponsesObject } from "zod-openapi";
import { ErrorBodySchema } from "../contracts/errors";

/**
 * One operation of the API reference, in a compact form that document.ts turns into OpenAPI:
 * every schema is a zod contract of lib/contracts (the same ones the handlers validate with),
 * and every error status answers the one error body.
 */
export type Operation = {
  summary: string;
  description?: string;
  tags: string[];
  /** `api`: Bearer API key; `model`: Bearer model key; `signed`: a signed URL; `none`: public. */
  auth: "api" | "model" | "signed" | "none";
  path?: z.ZodObject;
  query?: z.ZodObject;
  /** A JSON body, or another content type's (JSON Lines for an import). */
  body?: z.ZodType;
  bodyType?: string;
  /** Accepts an Idempotency-Key header. */
  idempotent?: true;
  /** Other request headers it reads (the capture's X-Pipeline-*). */
  headers?: z.ZodObject;
  /** The success status (default 200), its description and JSON schema. */
  status?: number;
  success: string;
  response?: z.ZodType;
  /** Other content types of the success response (server-sent events, a file). */
  responseTypes?: Record<string, z.ZodType>;
  /** The error statuses this operation answers beyond 401, 429 and 500. */
  errors: number[];
};

const ERROR_TEXT: Record<number, string> = {
  400: "Invalid request: `param` names the field",
  401: "Missing, malformed, unknown or revoked key",
  403: "Signature missing, wrong or expired; or a key not allowed here",
  404: "Unknown id (another team's ids answer the same)",
  409: "Conflict: a name in use, a job not finished, or an idempotent request still running",
  413: "Body over the limit",
  422: "The Idempotency-Key was used with another request",
  429: "Rate limited (Retry-After says when to retry)",
  500: "Internal error (the message carries the request id)",
  416: "The byte range asked for is past the end of the file",
  503: "No live worker can run it",
  507: "The server's disk is nearly full (BLOB_MIN_FREE_BYTES): nothing was stored",
};

const errorResponse = (status: number) => ({
  description: ERROR_TEXT[status] ?? "Error",
  content: { "application/json": { schema: ErrorBodySchema } },
});

export const IdempotencyKeyHeader = z
  .string()
  .min(1)
  .max(255)
  .meta({
    description:
      "Makes the write safe to retry: within 24 hours, the same key (per team) with the same request " +
      "returns the first response again and writes nothing; with another request it is a 422.",
  });

/** The OpenAPI operation object of an Operation. */
export function toOperationObject(op: Operation): ZodOpenApiOperationObject {
  const status = op.status ?? 200;
  const content: Record<string, { schema: z.ZodType }> = {};
  if (op.response) content["application/json"] = { schema: op.response };
  for (const [type, schema] of Object.entries(op.responseTypes ?? {})) content[type] = { schema };
  const errors = [...new Set([...op.errors, ...(op.auth === "api" || op.auth === "model" ? [401, 429] : []), 500])];
  const responses: ZodOpenApiResponsesObject = {
    [String(status)]: { description: op.success, ...(Object.keys(content).length > 0 ? { content } : {}) },
    ...Object.fromEntries(errors.sort().map((s) => [String(s), errorResponse(s)])),
  };
  return {
    summary: op.summary,
    ...(op.description ? { description: op.description } : {}),
    tags: op.tags,
    security: op.auth === "api" ? [{ apiKey: [] }] : op.auth === "model" ? [{ modelKey: [] }] : [],
    requestParams: {
      ...(op.path ? { path: op.path } : {}),
      ...(op.query ? { query: op.query } : {}),
      ...(op.idempotent || op.headers
        ? {
            header: z.object({
              ...(op.idempotent ? { "Idempotency-Key": IdempotencyKeyHeader.optional() } : {}),
              ...(op.headers?.shape ?? {}),
            }),
          }
        : {}),
    },
    ...(op.body
      ? { requestBody: { required: true, content: { [op.bodyType ?? "application/json"]: { schema: op.body } } } }
      : {}),
    responses,
  };
}
