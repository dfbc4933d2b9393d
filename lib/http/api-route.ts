import type { z } from "zod";
import { getDb, type DbHandle } from "../db/client";
import { takeRequest, teamLimits } from "../limits";
import { authenticateKey, type KeyPrincipal } from "../services/api-keys";
import { observeResponse } from "../observe/request";
import { errorResponse, newRequestId } from "./respond";
import { idempotencyKeyOf, idempotentJson } from "./idempotency";
import { bodyOf, handlerResponse, jsonTextResponse, routeParams, type RouteContext } from "./route-parts";

type Options<B extends z.ZodType | undefined> = {
  /** `api`: Bearer API key required (default). `none`: public (the handler checks what it needs). */
  auth?: "api" | "none";
  /** Zod schema of the JSON body; the body is read (with the size limit) only when given. */
  body?: B;
  /**
   * Honours an `Idempotency-Key` header (lib/services/idempotency.ts): the handler runs once per
   * key and request, and a repeat gets the first response. The handler returns a plain value.
   */
  idempotent?: true;
};

type Handler<B extends z.ZodType | undefined, A extends "api" | "none"> = (ctx: {
  req: Request;
  requestId: string;
  /** `performance.now()` when the request came in, before its key was checked (abortOnRevoke's `since`). */
  startedAt: number;
  handle: DbHandle;
  params: Record<string, string>;
  body: B extends z.ZodType ? z.infer<B> : undefined;
  principal: A extends "api" ? KeyPrincipal : undefined;
}) => Promise<Response | unknown>;

/**
 * Wraps a hosted-API route handler: request id, API-key auth, body size limit, JSON parsing,
 * zod validation and error mapping happen here, so a handler is just the service call.
 * A handler's plain return value is sent as JSON with status 200.
 */
export function apiRoute<B extends z.ZodType | undefined = undefined, A extends "api" | "none" = "api">(
  options: Options<B> & { auth?: A },
  handler: Handler<B, A>,
) {
  return async (req: Request, context: RouteContext): Promise<Response> => {
    const requestId = newRequestId();
    const startedAt = performance.now();
    let teamId: string | undefined;
    let res: Response;
    let limitHeaders: Record<string, string> = {};
    try {
      const handle = getDb();
      const principal =
        (options.auth ?? "api") === "api"
          ? await authenticateKey(handle.db, req.headers.get("authorization"), "api")
          : undefined;
      teamId = principal?.team.id;
      if (principal) limitHeaders = takeRequest(principal.key.id, teamLimits(principal.team));
      const key = options.idempotent ? idempotencyKeyOf(req.headers.get("idempotency-key")) : undefined;
      const { raw, value: body } = await bodyOf(req, options.body, teamId);
      const params = await routeParams(context);
      const run = () =>
        handler({
          req,
          requestId,
          startedAt,
          handle,
          params,
          body: body as never,
          principal: principal as never,
        });
      if (!options.idempotent || !principal) res = handlerResponse(await run(), requestId, limitHeaders);
      else {
        const path = new URL(req.url).pathname;
        const result = await idempotentJson(
          handle,
          { teamId: principal.team.id, key, method: req.method, path, body: raw, status: 200 },
          run,
        );
        res = jsonTextResponse(result.json, result.status, requestId, {
          ...limitHeaders,
          ...(result.replayed ? { "idempotent-replayed": "true" } : {}),
        });
      }
    } catch (err) {
      res = errorResponse(err, requestId);
      // Every answer of a limited route has the requests-per-minute limit's RateLimit-* headers.
      for (const [k, v] of Object.entries(limitHeaders)) res.headers.set(k, v);
    }
    return observeResponse(req, context, { requestId, startedAt, teamId }, res);
  };
}
