// The worker's internal inference API (loopback by default, shared-secret bearer auth).
//
//   POST /generate         JSON GenerationRequest → 200 JSON GenerationResult
//                          (a `prompt`, or chat `messages` rendered with the model's chat template);
//                          the 200 is sent once the request is accepted, the result when it is
//                          done, or `{"error":{…}}` in its place when the generation fails
//   POST /generate-stream  JSON GenerationRequest → 200 application/x-ndjson: one
//                          GenerationStreamEvent per line ({"type":"delta"|"finish"|"done"|"error",…});
//                          the stream ends after "done" (or after an "error" event).
//   GET  /usage/:requestId {"usage":{prompt_tokens,…}}: what the generation sent with that
//                          x-request-id used (kept a minute), for the app to charge one whose
//                          client left; 404 when there is none (yet)
//   GET  /health           {"status":"ok","models":[…],"load":{…}}
//   GET  /metrics          prom-client metrics as JSON (the app serves them at /metrics)
//
// With `serves`, a request for a (model, dtype) the worker was not given for the request's team
// (WORKER_SERVES, or no longer deployed) is a 404 on `model` before anything runs or loads; the
// app then tries the next worker. Routing already keeps such requests away; this covers an app
// whose view of the workers is a few seconds old (a worker restarted with other WORKER_SERVES).
//
// Errors before the response starts: the error body {"error":{type,message,param?}} with its
// status (400, 401, 404, 413, 429 rate_limited when the engine is overloaded, 500).
// A client that disconnects cancels its generation. While a generation waits (queued behind
// others), the answer carries a space (/generate) or a blank line (/generate-stream) every
// `keepAliveMs`, so the app can tell a busy worker from a frozen one. `x-request-id` is logged.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { timingSafeEqual, createHash } from "node:crypto";
import type { Registry } from "prom-client";
import type { GenerationStreamEvent, GenerationUsage } from "@/lib/contracts/generation";
import { DtypeChoiceSchema, type DtypeChoice } from "@/lib/contracts/models";
import { env } from "@/lib/env";
import { collectResult, type Engine } from "../engine/engine";
import { EngineError } from "../engine/errors";
import { httpError, toHttpError, type HttpError } from "./error-mapping";
import { logger } from "@/lib/observe/log";

export interface InferenceServerOptions {
  engine: Engine;
  host?: string;
  port?: number;
  secret: string;
  /** Request body limit in bytes. */
  maxBodyBytes?: number;
  /** Longest silence within an answer (default: a third of WORKER_IDLE_TIMEOUT_MS). */
  keepAliveMs?: number;
  /**
   * Whether the worker takes a request for `model` in `dtype` from team `tenant` (the app's
   * routing keys: WORKER_SERVES's placement). Unset: every model the engine serves, for anyone.
   */
  serves?: (model: string, dtype: DtypeChoice, tenant: string | undefined) => boolean;
  /** The worker's metrics, served as prom-client JSON at GET /metrics. */
  metrics?: Registry;
  log?: (msg: string, err?: unknown) => void;
}

export interface InferenceServer {
  url: string;
  /**
   * Stops taking requests; those in flight (generations, streams) may finish for `graceMs`
   * (default 0), then every connection is closed, which cancels what is left.
   */
  close(graceMs?: number): Promise<void>;
}

const digest = (s: string) => createHash("sha256").update(s).digest();

/** How long, and how many, generations' usages are kept for GET /usage. */
const KEPT_USAGE_MS = 60_000;
const KEPT_USAGE_MAX = 10_000;

export async function startInferenceServer(opts: InferenceServerOptions): Promise<InferenceServer> {
  if (!opts.secret) throw new Error("startInferenceServer: a secret is required");
  const expected = digest(`Bearer ${opts.secret}`);
  // What the app forwards is at most a request it took (MAX_BODY_BYTES) made a little larger
  // (a chat's messages rendered with their template, the app's own fields): twice the app's limit.
  // Before, a fixed 1,000,000 bytes refused requests the app had accepted, with a limit the
  // client could not know.
  const maxBody = opts.maxBodyBytes ?? 2 * env().MAX_BODY_BYTES;
  const log = opts.log ?? ((msg, err) => logger().error({ err }, msg));
  const keepAliveMs = opts.keepAliveMs ?? Math.floor(env().WORKER_IDLE_TIMEOUT_MS / 3);

  let inFlight = 0;
  let drained: (() => void) | undefined;
  // What each generation used, by request id, for the app to charge one whose client left (a Map
  // keeps insertion order, so the oldest go first past the limit). Every generation's, not only
  // those this server saw cut short: a client that reads slowly leaves after the generation has
  // ended, its last events still on their way (here, in the socket or in the app).
  const keptUsage = new Map<string, { usage: GenerationUsage; at: number }>();
  const keepUsage = (requestId: string, usage: GenerationUsage) => {
    keptUsage.delete(requestId);
    keptUsage.set(requestId, { usage, at: Date.now() });
    for (const [id, v] of keptUsage) {
      if (keptUsage.size <= KEPT_USAGE_MAX && Date.now() - v.at < KEPT_USAGE_MS) break;
      keptUsage.delete(id);
    }
  };
  const server = createServer((req, res) => {
    inFlight++;
    const startedAt = performance.now();
    res.once("close", () => {
      if (--inFlight === 0) drained?.();
      // One line per request, with the app's request id (the same id is in the app's line).
      logger().info(
        {
          reqId: req.headers["x-request-id"] ?? null,
          route: (req.url ?? "/").split("?")[0],
          method: req.method,
          status: res.statusCode,
          ms: Math.round((performance.now() - startedAt) * 10) / 10,
          ...(res.writableFinished ? {} : { aborted: true }),
        },
        "inference request",
      );
    });
    handle(req, res).catch((e) => {
      log("unhandled", e);
      if (!res.headersSent) send(res, toHttpError(e));
      else res.destroy();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? "/", "http://internal");
    const requestId = String(req.headers["x-request-id"] ?? "-");
    if (!timingSafeEqual(digest(req.headers.authorization ?? ""), expected)) {
      return send(res, httpError(401, "unauthorized", "missing or invalid bearer secret"));
    }
    if (req.method === "GET" && url.pathname === "/health") {
      const load = await opts.engine.loadStats();
      return json(res, 200, { status: "ok", models: opts.engine.models, load });
    }
    if (req.method === "GET" && url.pathname === "/metrics" && opts.metrics) {
      return json(res, 200, await opts.metrics.getMetricsAsJSON());
    }
    if (req.method === "GET" && url.pathname.startsWith("/usage/")) {
      const kept = keptUsage.get(decodeURIComponent(url.pathname.slice("/usage/".length)));
      if (!kept || Date.now() - kept.at >= KEPT_USAGE_MS)
        return send(res, httpError(404, "invalid_request", "no generation under that request id in the last minute"));
      return json(res, 200, { usage: kept.usage });
    }
    const streaming = url.pathname === "/generate-stream";
    if (req.method !== "POST" || (url.pathname !== "/generate" && !streaming)) {
      return send(res, httpError(404, "invalid_request", `no route ${req.method} ${url.pathname}`));
    }
    const body = await readJson(req, maxBody);
    if ("status" in body) return send(res, body);
    const refused = opts.serves && refusal(opts.serves, body.value);
    if (refused) {
      logger().warn({ reqId: req.headers["x-request-id"] ?? null, err: refused.message }, "request turned away");
      return send(res, toHttpError(refused));
    }

    // Cancel the generation when the client goes away before the response is complete.
    const controller = new AbortController();
    res.on("close", () => {
      if (!res.writableFinished) controller.abort();
    });

    let events: AsyncIterable<GenerationStreamEvent>;
    try {
      events = await opts.engine.start(body.value, { signal: controller.signal });
    } catch (e) {
      if (toHttpError(e).status >= 500) log(`${requestId}: generation refused`, e);
      return send(res, toHttpError(e));
    }
    res.writeHead(200, {
      "content-type": streaming ? "application/x-ndjson; charset=utf-8" : "application/json; charset=utf-8",
      "cache-control": "no-store",
      "x-accel-buffering": "no",
    });
    res.flushHeaders();
    let lastWrite = Date.now();
    // A write made while the reader is behind waits for 'drain', or for the connection to close
    // (a client that left never drains: without it the handler hung, and the keep-alive timer
    // below went on adding a listener each tick). Writes that wait share one wait.
    let drained: Promise<void> | null = null;
    const write = async (text: string) => {
      lastWrite = Date.now();
      if (res.destroyed || res.write(text)) return;
      drained ??= new Promise<void>((resolve) => {
        const done = () => {
          res.off("drain", done);
          res.off("close", done);
          drained = null;
          resolve();
        };
        res.on("drain", done);
        res.on("close", done);
      });
      await drained;
    };
    const keepAlive = setInterval(
      () => {
        // Not while the reader is behind: the response is not idle, and each wait would add a listener.
        if (Date.now() - lastWrite >= keepAliveMs && !res.writableNeedDrain) void write(streaming ? "\n" : " ");
      },
      Math.max(50, Math.floor(keepAliveMs / 2)),
    );
    let used: GenerationUsage | undefined; // once the generation has ended
    try {
      if (!streaming) {
        const model = (body.value as { model?: unknown } | null)?.model;
        const result = await collectResult(events, typeof model === "string" ? model : (opts.engine.models[0] ?? ""));
        used = result.usage;
        await write(JSON.stringify(result));
      } else {
        for await (const event of events) {
          if (event.type === "done") used = event.usage;
          await write(JSON.stringify(event) + "\n");
        }
      }
    } catch (e) {
      used ??= (e as { usage?: GenerationUsage }).usage; // what a cancelled (or failed) generation had used
      if (!controller.signal.aborted) {
        if (toHttpError(e).status >= 500) log(`${requestId}: generation failed`, e);
        const error = toHttpError(e).body.error;
        await write(streaming ? JSON.stringify({ type: "error", error }) + "\n" : JSON.stringify({ error }));
      }
    } finally {
      clearInterval(keepAlive);
      if (used && requestId !== "-") keepUsage(requestId, used);
    }
    res.end();
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? 0, opts.host ?? "127.0.0.1", () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  const host = address.includes(":") ? `[${address}]` : address;
  return {
    url: `http://${host}:${port}`,
    close: async (graceMs = 0) => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      if (inFlight > 0 && graceMs > 0) {
        await new Promise<void>((resolve) => {
          drained = resolve;
          setTimeout(resolve, graceMs).unref();
        });
      }
      server.closeAllConnections();
      await closed;
    },
  };
}

function json(res: ServerResponse, status: number, value: unknown) {
  const text = JSON.stringify(value);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}

const send = (res: ServerResponse, e: HttpError) => json(res, e.status, e.body);

/** Why `serves` turns a request away (its model, dtype and team as sent), or null. */
function refusal(serves: NonNullable<InferenceServerOptions["serves"]>, value: unknown): EngineError | null {
  const { model, dtype, tenant } = (value ?? {}) as { model?: unknown; dtype?: unknown; tenant?: unknown };
  // Without a model the engine's default answers; a malformed request is the engine's 400.
  if (typeof model !== "string") return null;
  const choice = DtypeChoiceSchema.safeParse(dtype ?? "auto");
  if (!choice.success || (tenant !== undefined && typeof tenant !== "string")) return null;
  if (serves(model, choice.data, tenant)) return null;
  return new EngineError(
    "model_not_found",
    `model ${model} (${choice.data}) is not served by this worker${tenant === undefined ? "" : " for this team"}`,
    "model",
  );
}

async function readJson(req: IncomingMessage, limit: number): Promise<{ value: unknown } | HttpError> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) return httpError(413, "invalid_request", `request body exceeds ${limit} bytes`);
    chunks.push(chunk);
  }
  try {
    return { value: JSON.parse(Buffer.concat(chunks).toString("utf8")) };
  } catch {
    return httpError(400, "invalid_request", "request body is not valid JSON");
  }
}
