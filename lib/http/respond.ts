import { randomUUID } from "node:crypto";
import { ZodError } from "zod";
import { ApiError, fromZodError, type ErrorBody } from "../errors";
import { logger } from "../observe/log";

export function newRequestId(): string {
  return `req_${randomUUID().replace(/-/g, "")}`;
}

export function jsonResponse(data: unknown, init: ResponseInit = {}): Response {
  const headers = new Headers(init.headers);
  headers.set("content-type", "application/json; charset=utf-8");
  return new Response(JSON.stringify(data), { ...init, headers });
}

/**
 * The one place where a thrown value becomes an HTTP error: ApiError keeps its status,
 * a ZodError is a 400 naming the parameter, anything else is logged with the request id
 * and answered as a bare 500.
 */
export function errorResponse(err: unknown, requestId: string): Response {
  const { status, body, headers } = errorPayload(err, requestId);
  return jsonResponse(body, { status, headers: { ...headers, "x-request-id": requestId } });
}

/** The status and error body for a thrown value (see errorResponse). */
export function errorPayload(
  err: unknown,
  requestId: string,
): { status: number; body: ErrorBody; headers?: Record<string, string> } {
  let status: number;
  let body: ErrorBody;
  if (err instanceof ApiError) {
    status = err.status;
    body = err.toBody();
    if (err.headers) return { status, body, headers: err.headers };
  } else if (err instanceof ZodError) {
    const e = fromZodError(err);
    status = e.status;
    body = e.toBody();
  } else {
    logger().error({ reqId: requestId, err }, "unhandled error");
    status = 500;
    body = { error: { type: "internal", message: `Internal server error (request id ${requestId}).` } };
  }
  return { status, body };
}
