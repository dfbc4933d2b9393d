// Client for the worker's internal inference API (see workers/inference/server.ts for the
// protocol), over node:http with a keep-alive agent. Not fetch: every streamed token crosses
// this client, and undici's body (a web stream fed from a wasm parser, one promise per read)
// cost the app about twice the CPU per relayed token of a Node stream read in chunks.
import http, { type IncomingMessage } from "node:http";
import { env } from "@/lib/env";
import { boundedRequest } from "@/lib/net/bounded-request";
import type {
  GenerationErrorBody,
  GenerationRequestInput,
  GenerationResult,
  GenerationStreamEvent,
  GenerationUsage,
} from "@/lib/contracts/generation";

export class InferenceError extends Error {
  constructor(
    readonly status: number,
    readonly type: GenerationErrorBody["error"]["type"],
    message: string,
    readonly param?: string,
  ) {
    super(message);
    this.name = "InferenceError";
  }
}

/**
 * The worker's connection closed while a non-streamed generation ran on it: the worker died (or
 * was killed). Nothing of the answer has reached the client yet, so another worker may run it.
 */
export class WorkerLostError extends InferenceError {
  constructor() {
    super(502, "internal", "the worker closed the connection before it finished");
    this.name = "WorkerLostError";
  }
}

export interface InferenceClientOptions {
  url: string;
  secret: string;
  /** Defaults: WORKER_CONNECT_TIMEOUT_MS, WORKER_RESPONSE_TIMEOUT_MS, WORKER_IDLE_TIMEOUT_MS. */
  timeouts?: Partial<WorkerTimeouts>;
}

/**
 * A worker that stops answering (frozen, overloaded machine, half-open socket) must not hold a
 * request forever: connecting, the response's start (the worker answers as soon as it has
 * accepted a generation) and every gap in its body are bounded. The worker writes a blank line
 * (or a space) at least every third of the idle timeout while a generation waits in its queue.
 */
export type WorkerTimeouts = { connectMs: number; responseMs: number; idleMs: number };

/** The worker did not connect or start its answer in time: it may be tried again elsewhere. */
export class WorkerTimeoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WorkerTimeoutError";
  }
}

export interface CallOptions {
  signal?: AbortSignal;
  /** Sent as x-request-id, so the worker's log lines name the request. */
  requestId?: string;
}

/**
 * One pool of connections per process: the app talks to a handful of workers over and over.
 * Node's agent closes an idle socket a second before the worker's announced keep-alive timeout.
 */
const agent = new http.Agent({ keepAlive: true, scheduling: "lifo" });

export class InferenceClient {
  private readonly timeouts: WorkerTimeouts;

  constructor(private readonly opts: InferenceClientOptions) {
    const e = env();
    this.timeouts = {
      connectMs: e.WORKER_CONNECT_TIMEOUT_MS,
      responseMs: e.WORKER_RESPONSE_TIMEOUT_MS,
      idleMs: e.WORKER_IDLE_TIMEOUT_MS,
      ...opts.timeouts,
    };
  }

  async generate(request: GenerationRequestInput, opts: CallOptions = {}): Promise<GenerationResult> {
    const res = await this.request("POST", "/generate", request, opts);
    let text: string;
    try {
      text = await readText(res);
    } catch (e) {
      if (opts.signal?.aborted)
        throw opts.signal.reason instanceof Error ? opts.signal.reason : new DOMException("aborted", "AbortError");
      if (e instanceof InferenceError) throw e; // the worker went silent
      throw new WorkerLostError();
    }
    // The worker starts its answer once the generation is accepted; a failure after that comes
    // as an error body in place of the result.
    const value = JSON.parse(text) as GenerationResult | GenerationErrorBody;
    if ("error" in value) throw new InferenceError(500, value.error.type, value.error.message, value.error.param);
    return value;
  }

  /** Events as they arrive; an "error" event mid-stream is thrown as an InferenceError. */
  async *stream(request: GenerationRequestInput, opts: CallOptions = {}): AsyncIterable<GenerationStreamEvent> {
    yield* await this.open(request, opts);
  }

  /**
   * Starts a streamed generation and resolves once the worker has accepted it (validated and
   * queued), so a caller can still answer with an error status; rejects with an InferenceError
   * otherwise. Iterating the result reads the events as they arrive.
   */
  async open(request: GenerationRequestInput, opts: CallOptions = {}): Promise<AsyncIterable<GenerationStreamEvent>> {
    const res = await this.request("POST", "/generate-stream", request, opts);
    return readEvents(res, opts.signal);
  }

  /**
   * What a generation sent with `requestId` had used when its caller left it (the worker keeps
   * it a minute), to be charged; null when the worker has none. The worker learns of the leaving
   * when the connection closes, so a 404 is asked again for up to `waitMs`.
   */
  async leftUsage(requestId: string, waitMs = 1000): Promise<GenerationUsage | null> {
    const until = Date.now() + waitMs;
    for (;;) {
      try {
        const res = await this.request("GET", `/usage/${encodeURIComponent(requestId)}`);
        return (JSON.parse(await readText(res)) as { usage: GenerationUsage }).usage;
      } catch (e) {
        if (!(e instanceof InferenceError && e.status === 404) || Date.now() >= until) return null;
        await new Promise((r) => setTimeout(r, 25));
      }
    }
  }

  async health(): Promise<{ status: string; models: string[]; load?: Record<string, number | string>[] }> {
    const res = await this.request("GET", "/health");
    return JSON.parse(await readText(res)) as {
      status: string;
      models: string[];
      load?: Record<string, number | string>[];
    };
  }

  /**
   * Resolves with a 2xx response (its body not read yet); rejects with an InferenceError for any
   * other status, or with the connection's own error when the worker cannot be reached (the
   * router fails over on those). An aborted `signal` destroys the request, which the worker sees
   * as a disconnect and cancels the generation.
   */
  private request(method: string, path: string, body?: unknown, opts: CallOptions = {}): Promise<IncomingMessage> {
    const { signal, requestId } = opts;
    const { connectMs, responseMs, idleMs } = this.timeouts;
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string> = { authorization: `Bearer ${this.opts.secret}` };
    if (requestId) headers["x-request-id"] = requestId;
    if (payload !== undefined) {
      headers["content-type"] = "application/json";
      headers["content-length"] = String(Buffer.byteLength(payload));
    }
    return boundedRequest({
      url: `${this.opts.url}${path}`,
      method,
      headers,
      body: payload,
      agent,
      signal,
      bounds: { connectMs, firstByteMs: responseMs, idleMs },
      peer: "the worker",
      timeoutError: (message) => new WorkerTimeoutError(message),
      // The worker sends keep-alive blank lines: a silent body means a frozen worker.
      idleError: (message) => new InferenceError(504, "internal", message),
      refused: toError,
    });
  }
}

async function readText(res: IncomingMessage): Promise<string> {
  res.setEncoding("utf8");
  let text = "";
  for await (const chunk of res) text += chunk as string;
  return text;
}

async function* readEvents(res: IncomingMessage, signal?: AbortSignal): AsyncIterable<GenerationStreamEvent> {
  res.setEncoding("utf8"); // decodes across chunk boundaries: a character may be split between two
  let buffer = "";
  let finished = false;
  try {
    for await (const chunk of res) {
      buffer += chunk as string;
      let start = 0;
      let nl: number;
      while ((nl = buffer.indexOf("\n", start)) >= 0) {
        const line = buffer.slice(start, nl).trim();
        start = nl + 1;
        if (!line) continue;
        const event = JSON.parse(line) as GenerationStreamEvent;
        if (event.type === "error")
          throw new InferenceError(500, event.error.type, event.error.message, event.error.param);
        if (event.type === "done") finished = true;
        yield event;
      }
      buffer = buffer.slice(start);
    }
  } catch (e) {
    // The caller went away: say so as an AbortError (not a worker failure worth reporting).
    if (signal?.aborted)
      throw signal.reason instanceof Error ? signal.reason : new DOMException("aborted", "AbortError");
    if (e instanceof InferenceError || finished) throw e;
    throw new InferenceError(502, "internal", "the worker closed the stream before it finished");
  } finally {
    // Closing early disconnects, which cancels the generation on the worker.
    if (!res.complete) res.destroy();
  }
  // A worker that went away mid-generation must not look like a complete result.
  if (!finished) throw new InferenceError(502, "internal", "the worker closed the stream before it finished");
}

async function toError(res: IncomingMessage): Promise<InferenceError> {
  let body: GenerationErrorBody | null = null;
  try {
    body = JSON.parse(await readText(res)) as GenerationErrorBody;
  } catch {
    // not the worker's JSON error body: the status alone says what happened
  }
  return new InferenceError(
    res.statusCode ?? 0,
    body?.error?.type ?? "internal",
    body?.error?.message ?? `HTTP ${res.statusCode}`,
    body?.error?.param,
  );
}
