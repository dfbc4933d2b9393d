// What the Pages Router API routes (nodeApiRoute, nodeDeploymentRoute) share: writing a JSON
// answer straight to the Node response, server-sent events likewise, the route's label for
// metrics and logs, its dynamic segments, and the lingering read of a refused request's unread
// body.
import type { IncomingMessage, ServerResponse } from "node:http";
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import Negotiator from "negotiator";
import { logger } from "../observe/log";
import { routePattern } from "../observe/request";
import { segmentStrings } from "./route-parts";
import { SSE_HEADERS } from "./sse";

/** The Pages Router's request: a Node request with the route's dynamic segments in `query`. */
export type PagesRequest = IncomingMessage & { query: Partial<Record<string, string | string[]>> };

/**
 * The route's dynamic segments as strings (a catch-all segment joined with "/"), from `query`
 * (the callers check them with storableParams where their errors are answered).
 */
export function pagesParams(req: PagesRequest, names?: readonly string[]): Record<string, string> {
  return segmentStrings(names ? names.map((k) => [k, req.query[k]]) : Object.entries(req.query));
}

/**
 * The route's label as its public pattern: these routes are served through rewrites, so the file's
 * `/api/…` path is named as the client called it (`/api/v1/…` → `/v1/…`, `/api/deployments/…` →
 * `/deployments/…`).
 */
export function pagesRoutePattern(req: PagesRequest, params: Record<string, string | string[] | undefined>): string {
  return routePattern(new URL(req.url ?? "/", "http://x").pathname, params).replace(/^\/api\//, "/");
}

/**
 * Answers at least this large go out gzipped to a client that takes gzip, as Next.js's `compress`
 * does for the routes it serves (its threshold): these routes may be served without Next's
 * routing (scripts/lib/app-server.mjs). Server-sent events never are (each event must go out as
 * it comes).
 */
export const GZIP_MIN_BYTES = 1024;
const gzipped = promisify(gzip);

/** A JSON text as the whole answer, with its status and the request id (headers set before stay). */
export async function sendJson(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  json: string,
  requestId: string,
): Promise<void> {
  if (res.headersSent) {
    res.destroy(); // cannot happen unless a handler wrote: never send a second head
    return;
  }
  const headers: Record<string, string | number> = {
    "content-type": "application/json; charset=utf-8",
    "x-request-id": requestId,
  };
  const bytes = Buffer.byteLength(json);
  if (bytes >= GZIP_MIN_BYTES && req.method !== "HEAD") {
    headers.vary = "Accept-Encoding";
    if (new Negotiator(req).encoding(["gzip", "identity"]) === "gzip") {
      const body = await gzipped(json);
      res.writeHead(status, { ...headers, "content-encoding": "gzip", "content-length": body.length });
      res.end(body);
      return;
    }
  }
  res.writeHead(status, { ...headers, "content-length": bytes });
  res.end(json);
}

/** Sets each header of each set, later sets winning. */
export function setHeaders(res: ServerResponse, ...sets: Record<string, string>[]): void {
  for (const set of sets) for (const [k, v] of Object.entries(set)) res.setHeader(k, v);
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
export function discardRest(req: IncomingMessage): void {
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

/**
 * An abort controller that fires when the client goes away ('close' before the answer is
 * complete): the generation stops.
 */
export function abortWhenClientLeaves(res: ServerResponse): AbortController {
  const controller = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller;
}

/**
 * Answers 200 with server-sent events, then the frames `source` yields, each as it comes, pulling
 * the next only once the last was taken by the socket (a full buffer waits for 'drain'), and ends
 * the response after the last. The head goes out with the first frame when that frame is ready
 * before the next turn of the event loop (an upstream whose answer came with its first token: one
 * write and one wake-up of the client instead of two), else at once, so that the client sees the
 * answer start before the first token. `onStart` runs once the head is out: with the first frame,
 * once its write is done (the log line and the metric do not delay the first token). When the
 * client goes away: `controller` aborts (the generation stops) and `source.return()` runs (its
 * finally blocks close the upstream), as sseResponse's cancel does for a web stream.
 */
export async function sendEvents(
  res: ServerResponse,
  source: AsyncIterable<string>,
  o: { controller: AbortController; requestId: string; onStart?: () => void; keepAliveMs?: number },
): Promise<void> {
  res.writeHead(200, { ...SSE_HEADERS, "x-request-id": o.requestId });
  const iterator = source[Symbol.asyncIterator]();
  if (o.controller.signal.aborted) {
    // The client left while the stream was being opened.
    res.flushHeaders();
    o.onStart?.();
    await Promise.resolve(iterator.return?.()).catch(() => {});
    return;
  }
  let gone = false;
  let wake: (() => void) | undefined;
  const onClose = () => {
    if (res.writableFinished) return;
    gone = true;
    o.controller.abort();
    wake?.();
    // Queued behind a pending next() (an async generator runs one step at a time), which the
    // abort ends; errors of a source being torn down are of no interest to anyone any more.
    void Promise.resolve(iterator.return?.()).catch(() => {});
  };
  res.once("close", onClose);
  // A comment line after KEEP_ALIVE_MS without a write (a request waiting in the worker's queue,
  // a long prefill, an upstream thinking before its first token): every SSE client skips it, and
  // proxies and load balancers that cut a connection idle for 60 s (nginx's proxy_read_timeout)
  // no longer cut these. Not while the socket is full: then the client is the one not reading.
  const keepAliveMs = o.keepAliveMs ?? KEEP_ALIVE_MS;
  let lastWrite = performance.now();
  const beat = setInterval(
    () => {
      if (gone || wake || res.writableEnded || performance.now() - lastWrite < keepAliveMs) return;
      if (!res.headersSent) res.flushHeaders();
      res.write(": keep-alive\n\n");
      lastWrite = performance.now();
    },
    Math.max(10, keepAliveMs / 4),
  );
  beat.unref();
  let started = false;
  let framed = false;
  const start = () => {
    if (started) return;
    started = true;
    o.onStart?.();
  };
  let pending: Promise<IteratorResult<string>> | undefined = iterator.next();
  const settled = () => true;
  const firstReady = await Promise.race([
    pending.then(settled, settled),
    new Promise<false>((resolve) => setImmediate(resolve, false)),
  ]);
  if (!firstReady && !gone) {
    res.flushHeaders();
    start();
  }
  try {
    for (;;) {
      const next = await (pending ?? iterator.next());
      pending = undefined;
      if (gone) return;
      if (next.done) break;
      // onStart once the first frame is out (its write's callback), not ahead of it.
      const written = framed ? res.write(next.value) : res.write(next.value, () => start());
      framed = true;
      lastWrite = performance.now();
      if (!written) {
        await new Promise<void>((resolve) => {
          wake = resolve;
          res.once("drain", resolve);
        });
        res.removeListener("drain", wake!);
        wake = undefined;
        if (gone) return;
      }
    }
    res.end();
  } catch (err) {
    // The frame sources turn a failure into an error event; one that still throws cuts the
    // stream (as an errored web stream does), so that the client never takes it as complete.
    if (gone) return;
    logger().error({ reqId: o.requestId, err }, "stream failed");
    res.destroy();
  } finally {
    clearInterval(beat);
    if (!framed) start(); // a stream that ended or failed before its first frame
    res.removeListener("close", onClose);
  }
}

/** Time without a write after which a stream gets a `: keep-alive` comment line. */
export const KEEP_ALIVE_MS = 15_000;
