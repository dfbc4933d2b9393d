import type { z } from "zod";
import { getDb, type DbHandle } from "../db/client";
import { authenticateKey, type KeyPrincipal } from "../services/api-keys";
import { errorResponse, newRequestId } from "./respond";
import { handlerResponse, routeParams, validBody, type RouteContext } from "./route-parts";

type Options<B extends z.ZodType | undefined> = {
  /** `api`: Bearer API key required (default). `none`: public (the handler checks what it needs). */
  auth?: "api" | "none";
  /** Zod schema of the JSON body; the body is read (with the size limit) only when given. */
  body?: B;
};

type Handler<B extends z.ZodType | undefined, A extends "api" | "none"> = (ctx: {
  req: Request;
  requestId: string;
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
    try {
      const handle = getDb();
      const principal =
        (options.auth ?? "api") === "api"
          ? await authenticateKey(handle.db, req.headers.get("authorization"), "api")
          : undefined;
      const body = await validBody(req, options.body);
      const params = await routeParams(context);
      const result = await handler({
        req,
        requestId,
        handle,
        params,
        body: body as never,
        principal: principal as never,
      });
      return handlerResponse(result, requestId);
    } catch (err) {
      return errorResponse(err, requestId);
    }
  };
}
