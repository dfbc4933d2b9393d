import type { ServerResponse } from "node:http";
import type { z } from "zod";
import { getDb, type DbHandle } from "../db/client";
import { env } from "../env";
import { methodNotAllowed } from "../errors";
import { takeRequest, teamLimits } from "../limits";
import { authenticateKey, type KeyPrincipal } from "../services/api-keys";
import { readNodeJsonBody } from "./body";
import { observeRequest } from "../observe/request";
import { idempotencyKeyOf, idempotentJson } from "./idempotency";
import {
  abortWhenClientLeaves,
  discardRest,
  pagesParams,
  pagesRoutePattern,
  sendEvents,
  sendJson as send,
  setHeaders,
  type PagesRequest,
} from "./node-response";
import { abortOnRevoke } from "../services/key-watch";
import { holdingBodyBytes } from "../limits/body-bytes";
import { errorPayload, newRequestId } from "./respond";
import { storableParams, validated } from "./route-parts";

const STREAM = Symbol("stream");

/** A handler's streamed answer: server-sent events, one write per frame (see `streamed`). */
export type StreamedAnswer = { [STREAM]: AsyncIterable<string> };

/** Answers with the frames `events` yields (status 200), written as fast as the client reads. */
export const streamed = (events: AsyncIterable<string>): StreamedAnswer => ({ [STREAM]: events });

const isStreamed = (v: unknown): v is StreamedAnswer => typeof v === "object" && v !== null && STREAM in v;

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
 * are the same as apiRoute's. The production server (scripts/lib/app-server.mjs) also skips
 * Next's routing for these routes: 0.15 ms of app CPU per `add` against 0.62–0.69 ms through it.
 * So the handler gets a plain Node request with `query` holding the path's segments, and must
 * not rely on more of Next's.
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
  /**
   * The route's path parameters (`["id"]` for pipelines/[id]/…): Next puts the query string's
   * fields in the same `req.query`, and those are neither parameters nor part of the metrics label
   * (before, `?k1=v1` made `/[k1]/…` a route of its own: a series per name a client made up).
   */
  params?: readonly string[];
};

type Handler<B extends z.ZodType | undefined> = (ctx: {
  /** The Node request: a handler without a `body` schema may stream it (import). */
  req: PagesRequest;
  requestId: string;
  handle: DbHandle;
  params: Record<string, string>;
  body: B extends z.ZodType ? z.infer<B> : undefined;
  principal: KeyPrincipal;
  /**
   * Aborted when the client goes away before the answer is complete (an AbortError), or when
   * the key is revoked meanwhile (its reason then the 401 to report). Reading it starts the
   * key's watch: a handler that does not need it leaves it unread.
   */
  signal: AbortSignal;
}) => Promise<unknown>;

export function nodeApiRoute<B extends z.ZodType | undefined = undefined>(options: Options<B>, handler: Handler<B>) {
  return async (req: PagesRequest, res: ServerResponse): Promise<void> => {
    const requestId = newRequestId();
    const startedAt = performance.now();
    let teamId: string | undefined;
    let observed = false;
    const routeParams = pagesParams(req, options.params ?? []);
    // One log line and one metric sample: when the answer is sent, or when a stream starts.
    const observe = (streamStarted = false) => {
      if (observed) return;
      observed = true;
      observeRequest({
        // Served through a rewrite: the public path is /v1/…, not the file's /api/v1/….
        route: pagesRoutePattern(req, routeParams),
        method: req.method ?? "GET",
        // A client that left before the answer was sent (a timed-out chat completion, an
        // aborted import upload) is logged and counted too, as nginx does: 499. A stream is
        // observed as it starts, its head sent (before, every stream counted as a 499).
        status: streamStarted || res.writableFinished ? res.statusCode : 499,
        startedAt,
        requestId,
        teamId,
      });
    };
    res.once("finish", () => observe());
    res.once("close", () => observe());
    const controller = abortWhenClientLeaves(res);
    let limitHeaders: Record<string, string> = {};
    try {
      if (req.method !== options.method) {
        res.setHeader("allow", options.method);
        throw methodNotAllowed(req.method, options.method);
      }
      const handle = getDb();
      const principal = await authenticateKey(handle.db, req.headers.authorization, "api");
      teamId = principal.team.id;
      limitHeaders = takeRequest(principal.key.id, teamLimits(principal.team));
      setHeaders(res, limitHeaders);
      const key = options.idempotent ? idempotencyKeyOf(req.headers["idempotency-key"]) : undefined;
      const bodyLimit = options.maxBodyBytes?.() ?? env().MAX_BODY_BYTES;
      // Held from before the body is read until it is parsed and validated (lib/limits/body-bytes.ts):
      // the handler holds its parsed value only (a stream, for minutes, not its bytes).
      const schema = options.body;
      const { raw, body } = schema
        ? await holdingBodyBytes(teamId, req.headers["content-length"], bodyLimit, async () => {
            const raw = await readNodeJsonBody(req, bodyLimit);
            return { raw, body: validated(schema, raw) };
          })
        : { raw: undefined, body: undefined };
      const params = storableParams(routeParams);
      // A generation (streamed or long) ends when its key is revoked, not only new requests. The
      // key is watched only for handlers that take the signal: an add does not pay for it.
      let revocable: AbortSignal | undefined;
      const signal = () => {
        if (revocable) return revocable;
        const watched = abortOnRevoke(handle.sql, principal.key, startedAt, controller.signal);
        res.once("close", watched.unwatch);
        return (revocable = watched.signal);
      };
      const run = () =>
        handler({
          req,
          requestId,
          handle,
          params,
          body: body as never,
          principal,
          get signal() {
            return signal();
          },
        });
      const status = options.status ?? 200;
      if (!options.idempotent) {
        const answer = await run();
        if (!isStreamed(answer)) return await send(req, res, status, JSON.stringify(answer), requestId);
        return await sendEvents(res, answer[STREAM], { controller, requestId, onStart: () => observe(true) });
      }
      const path = (req.url ?? "").split("?")[0]!;
      const result = await idempotentJson(
        handle,
        { teamId: principal.team.id, key, method: req.method!, path, body: raw, status },
        run,
      );
      if (result.replayed) res.setHeader("idempotent-replayed", "true");
      await send(req, res, result.status, result.json, requestId);
    } catch (err) {
      const { status, body, headers } = errorPayload(err, requestId);
      // The RateLimit-* headers stay the requests-per-minute limit's (a token budget's 429 has its own).
      setHeaders(res, headers ?? {}, limitHeaders);
      if (!req.complete) discardRest(req);
      await send(req, res, status, JSON.stringify(body), requestId);
    }
  };
}

export { LINGER_BYTES, LINGER_MS } from "./node-response";
