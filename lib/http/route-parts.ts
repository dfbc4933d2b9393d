// The steps every route wrapper shares (apiRoute, sessionRoute, deploymentRoute): the route's
// params, the validated JSON body, and a handler's return value as the response.
import type { z } from "zod";
import { env } from "../env";
import { fromZodError } from "../errors";
import { readJsonBody } from "./body";
import { jsonResponse } from "./respond";

export type RouteContext = { params: Promise<Record<string, string | string[] | undefined>> };

/** The route's dynamic segments as strings (a catch-all segment joined with "/"). */
export async function routeParams(context: RouteContext): Promise<Record<string, string>> {
  return Object.fromEntries(
    Object.entries((await context.params) ?? {}).map(([k, v]) => [k, Array.isArray(v) ? v.join("/") : (v ?? "")]),
  );
}

/** The JSON body (size limit applied) validated by `schema`; undefined when there is no schema. */
export async function validBody<S extends z.ZodType>(req: Request, schema: S): Promise<z.infer<S>>;
export async function validBody(req: Request, schema: z.ZodType | undefined): Promise<unknown>;
export async function validBody(req: Request, schema: z.ZodType | undefined): Promise<unknown> {
  if (!schema) return undefined;
  const parsed = schema.safeParse(await readJsonBody(req, env().MAX_BODY_BYTES));
  if (!parsed.success) throw fromZodError(parsed.error);
  return parsed.data;
}

/** A handler's Response as is, or its plain value as JSON with status 200; both carry the request id. */
export function handlerResponse(result: unknown, requestId: string, headers: Record<string, string> = {}): Response {
  if (result instanceof Response) {
    result.headers.set("x-request-id", requestId);
    return result;
  }
  return jsonResponse(result, { headers: { "x-request-id": requestId, ...headers } });
}
