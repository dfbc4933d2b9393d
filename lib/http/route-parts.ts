// The steps every route wrapper shares (apiRoute, sessionRoute, the Node wrappers): the route's
// params, the validated JSON body, and a handler's return value as the response.
import type { z } from "zod";
import { env } from "../env";
import { holdingBodyBytes } from "../limits/body-bytes";
import { fromZodError, invalidRequest } from "../errors";
import { unstorable } from "../contracts/text";
import { readJsonBody } from "./body";
import { jsonResponse } from "./respond";

export type RouteContext = { params: Promise<Record<string, string | string[] | undefined>> };

/** The route's dynamic segments as strings (a catch-all segment joined with "/"), each storable. */
export async function routeParams(context: RouteContext): Promise<Record<string, string>> {
  return storableParams(segmentStrings(Object.entries((await context.params) ?? {})));
}

/** Segments as strings: a catch-all segment's parts joined with "/". */
export function segmentStrings(entries: [string, string | string[] | undefined][]): Record<string, string> {
  return Object.fromEntries(entries.map(([k, v]) => [k, Array.isArray(v) ? v.join("/") : (v ?? "")]));
}

/**
 * `params`, each one Postgres can look up: a segment holding U+0000 or an unpaired surrogate
 * (`/v1/pipelines/%00`) is a 400 naming it, as in a body, not a failed query (500).
 */
export function storableParams(params: Record<string, string>): Record<string, string> {
  for (const [k, value] of Object.entries(params)) {
    const why = unstorable(value);
    if (why) throw invalidRequest(`${k} ${why}.`, k);
  }
  return params;
}

/** The JSON body (size limit applied) validated by `schema`; undefined when there is no schema. */
export async function validBody<S extends z.ZodType>(req: Request, schema: S): Promise<z.infer<S>>;
export async function validBody(req: Request, schema: z.ZodType | undefined): Promise<unknown>;
export async function validBody(req: Request, schema: z.ZodType | undefined): Promise<unknown> {
  return (await bodyOf(req, schema)).value;
}

/** The JSON body as sent (`raw`, what an idempotency key compares) and as validated (`value`). */
export async function bodyOf(
  req: Request,
  schema: z.ZodType | undefined,
  teamId?: string,
): Promise<{ raw: unknown; value: unknown }> {
  if (!schema) return { raw: undefined, value: undefined };
  const limit = env().MAX_BODY_BYTES;
  // A team's bodies being read at once are bounded (lib/limits/body-bytes.ts); once parsed and
  // validated, a 1 MiB body's share is given back (the handler holds its parsed value only).
  const read = async () => {
    const raw = await readJsonBody(req, limit);
    return { raw, value: validated(schema, raw) };
  };
  return teamId ? holdingBodyBytes(teamId, req.headers.get("content-length"), limit, read) : read();
}

/** A JSON text as a response with its status, the request id and the given headers. */
export function jsonTextResponse(
  json: string,
  status: number,
  requestId: string,
  headers: Record<string, string> = {},
): Response {
  return new Response(json, {
    status,
    headers: { "content-type": "application/json; charset=utf-8", "x-request-id": requestId, ...headers },
  });
}

/** `value` checked against `schema`: a failure is the 400 naming the offending parameter. */
export function validated<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw fromZodError(parsed.error);
  return parsed.data;
}

/** A handler's Response as is, or its plain value as JSON with status 200; both carry the request id. */
export function handlerResponse(result: unknown, requestId: string, headers: Record<string, string> = {}): Response {
  if (result instanceof Response) {
    for (const [k, v] of Object.entries(headers)) result.headers.set(k, v);
    result.headers.set("x-request-id", requestId);
    return result;
  }
  return jsonResponse(result, { headers: { "x-request-id": requestId, ...headers } });
}
