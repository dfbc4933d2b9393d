// The wrapper of the deployment endpoints (/deployments/{team}/{name}), the counterpart of
// apiRoute for model keys: request id, model-key auth (header, or `?authorization=` on GET for
// the browser's EventSource, which cannot send headers), the deployment the key may call, CORS
// on every answer, error mapping, and an abort signal that fires when the client goes away.
import type { z } from "zod";
import { getDb, type DbHandle } from "../db/client";
import type { Deployment, Team } from "../db/schema";
import { authenticateKey } from "../services/api-keys";
import { authorizeDeployment, findDeploymentByPath } from "../services/deployments";
import { withCors } from "./cors";
import { queryAuthorization } from "./deployment-query";
import { errorResponse, newRequestId } from "./respond";
import { validBody, type RouteContext } from "./route-parts";

export type DeploymentContext = {
  req: Request;
  url: URL;
  requestId: string;
  handle: DbHandle;
  deployment: Deployment;
  team: Team;
  /** Aborted when the client disconnects (or the response stream is cancelled via `abort`). */
  signal: AbortSignal;
  abort: () => void;
};

export function deploymentRoute<B extends z.ZodType | undefined = undefined>(
  options: { /** Zod schema of the JSON body (POST); GET has none. */ body?: B },
  handler: (ctx: DeploymentContext & { body: B extends z.ZodType ? z.infer<B> : undefined }) => Promise<Response>,
) {
  return async (req: Request, context: RouteContext): Promise<Response> => {
    const requestId = newRequestId();
    const controller = new AbortController();
    const abort = () => controller.abort();
    if (req.signal.aborted) abort();
    else req.signal.addEventListener("abort", abort, { once: true });
    let res: Response;
    try {
      const handle = getDb();
      const url = new URL(req.url);
      const authorization = req.headers.get("authorization") ?? (req.method === "GET" ? queryAuthorization(url) : null);
      const params = await context.params;
      const path = { teamSlug: String(params.team ?? ""), name: String(params.name ?? "") };
      // The body is read and both lookups run at once: all three are on the path to the first
      // token. A bad key or deployment still answers before a bad body does.
      const body = validBody(req, options.body);
      body.catch(() => {}); // its error is thrown below, once the key has been accepted
      const [principal, found] = await Promise.all([
        authenticateKey(handle.db, authorization, "model"),
        findDeploymentByPath(handle.db, path),
      ]);
      const deployment = authorizeDeployment(principal, path, found);
      res = await handler({
        body: (await body) as never,
        req,
        url,
        requestId,
        handle,
        deployment,
        team: principal.team,
        signal: controller.signal,
        abort,
      });
    } catch (err) {
      res = errorResponse(err, requestId);
    }
    res.headers.set("x-request-id", requestId);
    return withCors(res);
  };
}
