import type { IncomingMessage } from "node:http";
import { invalidRequest, payloadTooLarge } from "../errors";
import { LINGER_BYTES, LINGER_MS } from "./node-response";

/**
 * Reads a JSON body with a byte limit: 413 past it, checked against Content-Length (Node's
 * parser never delivers more bytes than that header says) or, for a chunked body, while reading.
 * An empty body reads as `{}`: every operation whose fields are all optional works without one.
 */
export async function readJsonBody(req: Request, limit: number): Promise<unknown> {
  const length = req.headers.get("content-length");
  const declared = length === null ? NaN : Number(length);
  if (declared > limit) throw payloadTooLarge(limit);
  if (!req.body) return {};
  // With a Content-Length, Node's HTTP parser delivers exactly that many bytes: read them in one
  // go (the common case, and the cheaper one). Without it (chunked), count while reading.
  return parseJsonBytes(await readBodyBytes(req, limit));
}

/**
 * A body's bytes, at most `limit` (413 past it, by Content-Length or while reading a chunked
 * one): for a handler that parses the body itself (next-auth), which would otherwise buffer
 * whatever it is sent.
 */
export async function readBodyBytes(req: Request, limit: number): Promise<Buffer> {
  const length = req.headers.get("content-length");
  const declared = length === null ? NaN : Number(length);
  if (declared > limit) {
    if (req.body) linger(req.body.getReader());
    throw payloadTooLarge(limit);
  }
  if (!req.body) return Buffer.alloc(0);
  return Number.isFinite(declared) ? Buffer.from(await req.arrayBuffer()) : readLimited(req.body, limit);
}

/** `readJsonBody` for a Node request (Pages Router API routes): the same limit, the same errors. */
export async function readNodeJsonBody(req: IncomingMessage, limit: number): Promise<unknown> {
  const declared = Number(req.headers["content-length"] ?? NaN);
  if (declared > limit) throw payloadTooLarge(limit);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      // The rest is discarded as it arrives, within bounds (see discardRest in nodeApiRoute).
      req.resume();
      throw payloadTooLarge(limit);
    }
    chunks.push(chunk);
  }
  return parseJsonBytes(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** A body's bytes as JSON; blank reads as `{}`. */
function parseJsonBytes(bytes: Buffer): unknown {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    // Before, invalid bytes became U+FFFD and were stored as if sent (an import refuses the line).
    throw invalidRequest("Request body is not valid UTF-8.", "body");
  }
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text);
  } catch (err) {
    throw invalidRequest(`Request body is not valid JSON: ${(err as Error).message}`);
  }
}

async function readLimited(body: ReadableStream<Uint8Array>, limit: number): Promise<Buffer> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      linger(reader);
      throw payloadTooLarge(limit);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

/**
 * The rest of a refused body, read and dropped in the background (a web server's lingering
 * close, as discardRest does for the Node routes): the client, still sending, then reads the 413
 * and its connection stays usable, rather than being reset under it. Up to LINGER_BYTES or
 * LINGER_MS; past either the body is cancelled, which cuts the connection.
 */
function linger(reader: ReadableStreamDefaultReader<Uint8Array>): void {
  let seen = 0;
  const cut = () => void reader.cancel().catch(() => undefined);
  const timer = setTimeout(cut, LINGER_MS);
  timer.unref();
  void (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        seen += value.byteLength;
        if (seen > LINGER_BYTES) return cut();
      }
    } catch {
      // The client went away: nothing to linger for.
    } finally {
      clearTimeout(timer);
    }
  })();
}
