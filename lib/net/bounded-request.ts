// One HTTP request whose every wait is bounded: the connection, the first byte of the answer,
// and each gap in its body. Shared by the app's calls to its workers and to upstream servers.
import http, { type IncomingMessage } from "node:http";
import https from "node:https";

export type RequestBounds = { connectMs: number; firstByteMs: number; idleMs: number };

export type BoundedRequest = {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
  agent: http.Agent;
  signal?: AbortSignal;
  bounds: RequestBounds;
  /** Who answers, in the timeout messages ("the worker", "the upstream"). */
  peer: string;
  /** The error a missed connect or first byte destroys the request with. */
  timeoutError: (message: string) => Error;
  /** The error a silent body destroys the response with. */
  idleError: (message: string) => Error;
  /** The error for a status outside 2xx (its body not read yet). */
  refused: (res: IncomingMessage) => Promise<Error>;
};

/**
 * Resolves with a 2xx response, its body not read yet; rejects with `refused`'s error for any
 * other status, with `timeoutError` when the connection or the first byte takes too long, or
 * with the connection's own error. A kept-alive connection the peer closed just as it was
 * reused never reached it, so that request is sent once more on a new connection. An aborted
 * `signal` destroys the request, which the peer sees as a disconnect.
 */
export function boundedRequest(o: BoundedRequest): Promise<IncomingMessage> {
  const { connectMs, firstByteMs, idleMs } = o.bounds;
  const secure = o.url.startsWith("https:");
  const attempt = (retried: boolean): Promise<IncomingMessage> =>
    new Promise((resolve, reject) => {
      const req = (secure ? https : http).request(o.url, {
        method: o.method,
        headers: o.headers,
        agent: o.agent,
        signal: o.signal,
      });
      const fail = (message: string) => req.destroy(o.timeoutError(message));
      const firstByte = setTimeout(() => fail(`${o.peer} did not answer within ${firstByteMs} ms`), firstByteMs);
      req.once("socket", (socket) => {
        if (!socket.connecting) return; // a kept-alive connection
        const connectTimer = setTimeout(() => fail(`could not connect to ${o.peer} within ${connectMs} ms`), connectMs);
        socket.once(secure ? "secureConnect" : "connect", () => clearTimeout(connectTimer));
        req.once("close", () => clearTimeout(connectTimer));
      });
      req.once("close", () => clearTimeout(firstByte));
      req.once("response", (res) => {
        clearTimeout(firstByte);
        // Every gap in the body is bounded too. The socket is kept alive for later requests:
        // the timer and its listener go with this response.
        const socket = res.socket;
        const onIdle = () => res.destroy(o.idleError(`${o.peer} sent nothing for ${idleMs} ms`));
        socket.setTimeout(idleMs);
        socket.on("timeout", onIdle);
        res.once("close", () => {
          socket.setTimeout(0);
          socket.off("timeout", onIdle);
        });
        const status = res.statusCode ?? 0;
        if (status >= 200 && status < 300) resolve(res);
        else o.refused(res).then(reject, reject);
      });
      req.once("error", (err: NodeJS.ErrnoException) => {
        if (!retried && req.reusedSocket && err.code === "ECONNRESET") attempt(true).then(resolve, reject);
        else reject(err);
      });
      req.end(o.body);
    });
  return attempt(false);
}
