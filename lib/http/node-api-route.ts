import type { IncomingMessage, ServerResponse } from "node:http";
import type { z } from "zod";
import { getDb, type DbHandle } from "../db/client";
import { env } from "../env";
import { ApiError } from "../errors";
import { takeRequest, teamLimits } from "../limits";
import { authenticateKey, type KeyPrincipal } from "../services/api-keys";
import { readNodeJsonBody } from "./body";
import { observeRequest, routePattern } from "../observe/request";
import { idempotencyKeyOf, idempotentJson } from "./idempotency";
import { errorPayload, newRequestId } from "./respond";
import { validated } from "./route-parts";

/**
 * `apiRoute` for the hosted API's high-volume ingest routes, served as Pages Router API routes
 * (`pages/api/v1/**`, mapped onto their `/v1` paths by rewrites in next.config.mjs).
 *
 * Why not an App Router handler like the rest: there, Next.js turns every request into a web
 * `Request` whose body is a web stream built from the Node request, and the handler's `Response`
 * back into Node writes. For a small JSON POST that machinery costs more CPU than the work
 * itself (`npm run bench -- ingest`: an App Router `add` took 0.93 ms of app CPU against 0.64 ms
 * for an empty GET; as a Pages API route, 0.67 ms). Here the handler reads the Node request and
 * writes the Node response directly. Auth, body limit, zod, the error body and the request id
 * are the same as apiRoute's.
 */
type Options<B extends z.ZodType | undefined> = {
  method: "POST";
  /** Zod schema of the JSON body (read with the size limit); without it, no body is read here. */
  body?: B;
  /** The body's limit; default MAX_BODY_BYTES (add-batch has a limit of its own). */
  maxBodyBytes?: () => number;
  /** Honours an `Idempotency-Key` header, as apiRoute's option of the same name. */
  idempotent?: true;
  /** The status of a success (default 200; 202 for a job accepted, such as an import). */
  status?: number;
};

type Handler<B extends z.ZodType | undefined> = (ctx: {
  /** The Node request: a handler without a `body` schema may stream it (import). */
  req: PagesRequest;
  requestId: string;
  handle: DbHandle;
  params: Record<string, string>;
  body: B extends z.ZodType ? z.infer<B> : undefined;
  principal: KeyPrincipal;
}) => Promise<unknown>;

/** The Pages Router's request: a Node request with the route's dynamic segments in `query`. */
type PagesRequest = IncomingMessage & { query: Partial<Record<string, string | string[]>> };

export function nodeApiRoute<B extends z.ZodType | undefined = undefined>(options: Options<B>, handler: Handler<B>) {
  return async (req: PagesRequest, res: ServerResponse): Promise<void> => {
    const requestId = newRequestId();
    const startedAt = performance.now();
    let teamId: string | undefined;
    res.once("finish", () =>
      observeRequest({
        // Served through a rewrite: the public path is /v1/…, not the file's /api/v1/….
        route: routePattern(new URL(req.url ?? "/", "http://x").pathname, req.query).replace(/^\/api\/v1\//, "/v1/"),
        method: req.method ?? "GET",
        status: res.statusCode,
        startedAt,
        requestId,
        teamId,
      }),
    );
    try {
      if (req.method !== options.method) {
        res.setHeader("allow", options.method);
        throw new ApiError(405, "invalid_request", `Method ${req.method} is not allowed here; use ${options.method}.`);
      }
      const handle = getDb();
      const principal = await authenticateKey(handle.db, req.headers.authorization, "api");
      teamId = principal.team.id;
      for (const [k, v] of Object.entries(takeRequest(principal.key.id, teamLimits(principal.team))))
        res.setHeader(k, v);
      const key = options.idempotent ? idempotencyKeyOf(req.headers["idempotency-key"]) : undefined;
      const raw = options.body
        ? await readNodeJsonBody(req, options.maxBodyBytes?.() ?? env().MAX_BODY_BYTES)
        : undefined;
      const body = options.body ? validated(options.body, raw) : undefined;
      const params = Object.fromEntries(
        Object.entries(req.query).map(([k, v]) => [k, Array.isArray(v) ? v.join("/") : (v ?? "")]),
      );
      const run = () => handler({ req, requestId, handle, params, body: body as never, principal });
      const status = options.status ?? 200;
      if (!options.idempotent) return send(res, status, JSON.stringify(await run()), requestId);
      const path = (req.url ?? "").split("?")[0]!;
      const result = await idempotentJson(
        handle,
        { teamId: principal.team.id, key, method: req.method!, path, body: raw, status },
        run,
      );
      if (result.replayed) res.setHeader("idempotent-replayed", "true");
      send(res, result.status, result.json, requestId);
    } catch (err) {
      const { status, body, headers } = errorPayload(err, requestId);
      for (const [k, v] of Object.entries(headers ?? {})) res.setHeader(k, v);
      if (!req.complete) discardRest(req);
      send(res, status, JSON.stringify(body), requestId);
    }
  };
}

function send(res: ServerResponse, status: number, json: string, requestId: string): void {
  if (res.headersSent) {
    res.destroy(); // cannot happen unless a handler wrote: never send a second head
    return;
  }
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(json),
    "x-request-id": requestId,
  });
  res.end(json);
}

/** What an answered request's unread body may still send before its connection is cut. */
export const LINGER_BYTES = 64 * 1024 * 1024;
export const LINGER_MS = 10_000;

/**
 * A request answered before its body was read (refused: too large, wrong pipeline, bad key) has
 * a client still sending. Closing at once would reset the connection under that client, which
 * then reports EPIPE / ECONNRESET instead of our answer. So, like a web server's lingering close,
 * the rest is read and discarded, and the connection stays usable once it ends, but only up to
 * LINGER_BYTES or LINGER_MS: past either the connection is cut, rather than reading what may
 * be a gigabyte.
 */
function discardRest(req: IncomingMessage): void {
  let seen = 0;
  const cut = () => req.socket.destroy();
  const timer = setTimeout(cut, LINGER_MS);
  timer.unref();
  req.on("data", (chunk: Buffer) => {
    seen += chunk.length;
    if (seen > LINGER_BYTES) cut();
  });
  req.once("end", () => clearTimeout(timer));
  req.once("close", () => clearTimeout(timer));
  req.resume();
}
