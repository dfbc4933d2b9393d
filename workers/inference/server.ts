// The worker's internal inference API (loopback by default, shared-secret bearer auth).
//
//   POST /generate         JSON GenerationRequest → 200 JSON GenerationResult
//                          (a `prompt`, or chat `messages` rendered with the model's chat template)
//   POST /generate-stream  JSON GenerationRequest → 200 application/x-ndjson: one
//                          GenerationStreamEvent per line ({"type":"delta"|"finish"|"done"|"error",…});
//                          the stream ends after "done" (or after an "error" event).
//   GET  /health           {"status":"ok","models":[…],"load":{…}}
//
// Errors before the response starts: the error body {"error":{type,message,param?}} with its
// status (400, 401, 404, 413, 429 rate_limited when the engine is overloaded, 500).
// A client that disconnects cancels its generation.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { timingSafeEqual, createHash } from "node:crypto";
import type { Engine } from "../engine/engine";
import { httpError, toHttpError, type HttpError } from "./error-mapping";

export interface InferenceServerOptions {
  engine: Engine;
  host?: string;
  port?: number;
  secret: string;
  /** Request body limit in bytes. */
  maxBodyBytes?: number;
  log?: (msg: string, err?: unknown) => void;
}

export interface InferenceServer {
  url: string;
  close(): Promise<void>;
}

const digest = (s: string) => createHash("sha256").update(s).digest();

export async function startInferenceServer(opts: InferenceServerOptions): Promise<InferenceServer> {
  if (!opts.secret) throw new Error("startInferenceServer: a secret is required");
  const expected = digest(`Bearer ${opts.secret}`);
  const maxBody = opts.maxBodyBytes ?? 1_000_000;
  const log = opts.log ?? ((msg, err) => console.error(`[inference] ${msg}`, err ?? ""));

  const server = createServer((req, res) => {
    handle(req, res).catch((e) => {
      log("unhandled", e);
      if (!res.headersSent) send(res, toHttpError(e));
      else res.destroy();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? "/", "http://internal");
    if (!timingSafeEqual(digest(req.headers.authorization ?? ""), expected)) {
      return send(res, httpError(401, "unauthorized", "missing or invalid bearer secret"));
    }
    if (req.method === "GET" && url.pathname === "/health") {
      const load = await Promise.all(
        opts.engine.models.map(async (id) => ({ id, ...(await opts.engine.scheduler(id)).stats() })),
      ).catch(() => []);
      return json(res, 200, { status: "ok", models: opts.engine.models, load });
    }
    const streaming = url.pathname === "/generate-stream";
    if (req.method !== "POST" || (url.pathname !== "/generate" && !streaming)) {
      return send(res, httpError(404, "invalid_request", `no route ${req.method} ${url.pathname}`));
    }
    const body = await readJson(req, maxBody);
    if ("status" in body) return send(res, body);

    // Cancel the generation when the client goes away before the response is complete.
    const controller = new AbortController();
    res.on("close", () => {
      if (!res.writableFinished) controller.abort();
    });

    if (!streaming) {
      try {
        return json(res, 200, await opts.engine.generate(body.value, { signal: controller.signal }));
      } catch (e) {
        if (controller.signal.aborted) return;
        if (toHttpError(e).status >= 500) log("generate failed", e);
        return send(res, toHttpError(e));
      }
    }

    let events: AsyncIterable<unknown>;
    try {
      events = await opts.engine.start(body.value, { signal: controller.signal });
    } catch (e) {
      return send(res, toHttpError(e));
    }
    res.writeHead(200, {
      "content-type": "application/x-ndjson; charset=utf-8",
      "cache-control": "no-store",
      "x-accel-buffering": "no",
    });
    res.flushHeaders();
    try {
      for await (const event of events) {
        if (!res.write(JSON.stringify(event) + "\n")) await new Promise((r) => res.once("drain", r));
      }
    } catch (e) {
      if (!controller.signal.aborted)
        res.write(JSON.stringify({ type: "error", error: toHttpError(e).body.error }) + "\n");
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
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((e) => (e ? reject(e) : resolve()));
        server.closeAllConnections();
      }),
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
