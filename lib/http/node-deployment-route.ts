// The wrapper of the deployment endpoints (/deployments/{team}/{name}), served as a Pages Router
// API route (pages/api/deployments/[team]/[name].ts, mapped onto its public path by a rewrite in
// next.config.mjs) for the reason nodeApiRoute gives: an App Router handler costs ~1 ms of CPU per
// request more (web Request, Response and ReadableStream around the Node ones), which a deployment
// in front of a fast upstream server pays on every completion (`npm run bench -- upstream`). The
// production server (scripts/lib/app-server.mjs) calls the route's handler itself, without
// Next's routing: it gets a plain Node request with `query` holding `team` and `name`, and nothing
// else of Next's, so the handler must not rely on more.
// Request id, model-key auth (header, or `?authorization=` on GET for the browser's EventSource,
// which cannot send headers), the deployment the key may call, the key's rate-limit headers and
// CORS on every answer, error mapping, an abort signal that fires when the client goes away, and
// server-sent events written straight to the Node response as fast as the client reads them.
import type { ServerResponse } from "node:http";
import type { z } from "zod";
import { getDb, type DbHandle } from "../db/client";
import type { Deployment, Team } from "../db/schema";
import { env } from "../env";
import { methodNotAllowed } from "../errors";
import { logger } from "../observe/log";
import { observeRequest } from "../observe/request";
import type { CompletionMeter } from "../services/completion-events";
import { readNodeJsonBody } from "./body";
import { CORS_HEADERS } from "./cors";
import { queryAuthorization } from "./deployment-query";
import { admitDeploymentCall } from "./deployment-route";
import {
  abortWhenClientLeaves,
  discardRest,
  pagesParams,
  pagesRoutePattern,
  sendEvents,
  sendJson,
  setHeaders,
  type PagesRequest,
} from "./node-response";
import { abortOnRevoke } from "../services/key-watch";
import type { KeyPrincipal } from "../services/api-keys";
import { holdingBodyBytes } from "../limits/body-bytes";
import { errorPayload, newRequestId } from "./respond";
import { storableParams, validated } from "./route-parts";

export type NodeDeploymentContext = {
  req: PagesRequest;
  /** The query string (GET's parameters; `authorization` among them when given there). */
  query: URLSearchParams;
  requestId: string;
  handle: DbHandle;
  deployment: Deployment;
  team: Team;
  /** The model key the call is made with. */
  key: KeyPrincipal["key"];
  /**
   * Aborted when the client disconnects before the answer is complete (or via `abort`), or when
   * the model key is revoked meanwhile (its reason then the 401 to report).
   */
  signal: AbortSignal;
  /** What the generation counts against: the model key's quota, the metrics, usage. */
  meter: CompletionMeter;
  abort: () => void;
};

/** A handler's answer: a JSON body (status 200), or server-sent events, one write per frame. */
export type DeploymentAnswer = { json: unknown } | { events: AsyncIterable<string> };

type Method = "GET" | "POST";

type Handler<B extends z.ZodType | undefined> = (
  ctx: NodeDeploymentContext & { body: B extends z.ZodType ? z.infer<B> : undefined },
) => Promise<DeploymentAnswer>;

/** One method of the endpoint: `body` is the zod schema of its JSON body (POST); GET has none. */
export function nodeDeploymentRoute<B extends z.ZodType | undefined = undefined>(
  options: { method: Method; body?: B },
  handler: Handler<B>,
) {
  return async (req: PagesRequest, res: ServerResponse): Promise<void> => {
    const requestId = newRequestId();
    const startedAt = performance.now();
    const params = pagesParams(req, ["team", "name"]); // checked below, where errors are answered
    let teamId: string | undefined;
    let observed = false;
    // One log line and one metric sample when the answer starts (a stream may last minutes, or
    // never finish when its client leaves), as for the App Router's routes.
    const observe = () => {
      if (observed) return;
      observed = true;
      observeRequest({
        route: pagesRoutePattern(req, params),
        method: req.method ?? "GET",
        status: res.statusCode,
        startedAt,
        requestId,
        teamId,
      });
    };
    const controller = abortWhenClientLeaves(res);
    const abort = () => controller.abort();
    let limitHeaders: Record<string, string> = {};
    try {
      const handle = getDb();
      // Everything after the first "?" (a raw "?" may appear in the query itself: prompt=Why?).
      const url = req.url ?? "";
      const query = new URLSearchParams(url.includes("?") ? url.slice(url.indexOf("?") + 1) : "");
      const authorization =
        req.headers.authorization ?? (req.method === "GET" ? queryAuthorization(new URL(`http://x/?${query}`)) : null);
      storableParams(params);
      const path = { teamSlug: params.team!, name: params.name! };
      const { deployment, team, key, meter, ...admitted } = await admitDeploymentCall(handle, authorization, path);
      teamId = team.id;
      // A stream (or a long generation) ends when its key is revoked, not only new requests.
      const { signal, unwatch } = abortOnRevoke(handle.sql, key, startedAt, controller.signal);
      res.once("close", unwatch);
      limitHeaders = admitted.limitHeaders;
      // A model key's bodies count against its team's bodies in flight too (lib/limits/body-bytes.ts),
      // until parsed and validated.
      const schema = options.body;
      const limit = env().MAX_BODY_BYTES;
      const body = schema
        ? await holdingBodyBytes(team.id, req.headers["content-length"], limit, async () =>
            validated(schema, await readNodeJsonBody(req, limit)),
          )
        : undefined;
      const answer = await handler({
        body: body as never,
        req,
        query,
        requestId,
        handle,
        deployment,
        team,
        key,
        signal,
        abort,
        meter,
      });
      setHeaders(res, limitHeaders, CORS_HEADERS);
      if ("json" in answer) {
        res.statusCode = 200;
        observe();
        await sendJson(req, res, 200, JSON.stringify(answer.json), requestId);
        return;
      }
      await sendEvents(res, answer.events, { controller, requestId, onStart: observe });
    } catch (err) {
      if (res.headersSent) {
        // Cannot happen unless writing the events threw: never send a second head.
        logger().error({ reqId: requestId, err }, "stream failed");
        res.destroy();
        return;
      }
      const { status, body, headers } = errorPayload(err, requestId);
      setHeaders(res, headers ?? {}, limitHeaders, CORS_HEADERS);
      if (!req.complete) discardRest(req);
      res.statusCode = status;
      observe();
      await sendJson(req, res, status, JSON.stringify(body), requestId);
    }
  };
}

/**
 * The endpoint's one handler for all its methods (a rewrite cannot choose by method): OPTIONS is
 * the CORS preflight, GET and POST go to their routes, anything else is a 405.
 */
export function nodeDeploymentMethods(routes: Partial<Record<Method, ReturnType<typeof nodeDeploymentRoute>>>) {
  const allow = ["OPTIONS", ...Object.keys(routes)].join(", ");
  return async (req: PagesRequest, res: ServerResponse): Promise<void> => {
    const route = routes[req.method as Method];
    if (route) return route(req, res);
    if (req.method === "OPTIONS") {
      res.writeHead(204, CORS_HEADERS);
      res.end();
      return;
    }
    const requestId = newRequestId();
    const { status, body } = errorPayload(methodNotAllowed(req.method, allow), requestId);
    setHeaders(res, { allow }, CORS_HEADERS);
    if (!req.complete) discardRest(req);
    await sendJson(req, res, status, JSON.stringify(body), requestId);
  };
}
