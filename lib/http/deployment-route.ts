// The wrapper of the deployment endpoints (/deployments/{team}/{name}), the counterpart of
// apiRoute for model keys: request id, model-key auth (header, or `?authorization=` on GET for
// the browser's EventSource, which cannot send headers), the deployment the key may call, CORS
// on every answer, error mapping, and an abort signal that fires when the client goes away.
import type { z } from "zod";
import { getDb, type DbHandle } from "../db/client";
import type { Deployment, Team } from "../db/schema";
import { takeRequest, teamLimits } from "../limits";
import { authenticateKey } from "../services/api-keys";
import type { CompletionMeter } from "../services/completion-events";
import { authorizeDeployment, findDeploymentByPath } from "../services/deployments";
import { withCors } from "./cors";
import { queryAuthorization } from "./deployment-query";
import { observeResponse } from "../observe/request";
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
  /** What the generation counts against: the model key's quota, the metrics, usage. */
  meter: CompletionMeter;
  abort: () => void;
};

export function deploymentRoute<B extends z.ZodType | undefined = undefined>(
  options: { /** Zod schema of the JSON body (POST); GET has none. */ body?: B },
  handler: (ctx: DeploymentContext & { body: B extends z.ZodType ? z.infer<B> : undefined }) => Promise<Response>,
) {
  return async (req: Request, context: RouteContext): Promise<Response> => {
    const requestId = newRequestId();
    const startedAt = performance.now();
    let teamId: string | undefined;
    const controller = new AbortController();
    const abort = () => controller.abort();
    if (req.signal.aborted) abort();
    else req.signal.addEventListener("abort", abort, { once: true });
    let res: Response;
    let limitHeaders: Record<string, string> = {};
    try {
      const handle = getDb();
      const url = new URL(req.url);
      const authorization = req.headers.get("authorization") ?? (req.method === "GET" ? queryAuthorization(url) : null);
      const params = await context.params;
      const path = { teamSlug: String(params.team ?? ""), name: String(params.name ?? "") };
      // The key and the deployment first (both usually from this process's cache), the body only
      // for a caller allowed here: an anonymous client cannot make the app read 1 MiB.
      const [principal, found] = await Promise.all([
        authenticateKey(handle.db, authorization, "model"),
        findDeploymentByPath(handle.db, path),
      ]);
      const deployment = authorizeDeployment(principal, path, found);
      teamId = principal.team.id;
      const limits = teamLimits(principal.team);
      limitHeaders = takeRequest(principal.key.id, limits);
      const body = await validBody(req, options.body);
      res = await handler({
        body: body as never,
        req,
        url,
        requestId,
        handle,
        deployment,
        team: principal.team,
        signal: controller.signal,
        abort,
        meter: { quota: { keyId: principal.key.id, limits }, teamSlug: principal.team.slug },
      });
    } catch (err) {
      res = errorResponse(err, requestId);
    }
    for (const [k, v] of Object.entries(limitHeaders)) res.headers.set(k, v);
    res.headers.set("x-request-id", requestId);
    return observeResponse(req, context, { requestId, startedAt, teamId }, withCors(res));
  };
}
