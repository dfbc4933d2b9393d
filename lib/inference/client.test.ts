import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import type { GenerationStreamEvent } from "../contracts/generation";
import { InferenceClient, InferenceError, WorkerTimeoutError } from "./client";

let server: Server | undefined;

async function serve(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  timeouts?: ConstructorParameters<typeof InferenceClient>[0]["timeouts"],
): Promise<InferenceClient> {
  server = createServer(handler);
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return new InferenceClient({ url: `http://127.0.0.1:${port}`, secret: "s3cret", timeouts });
}

afterEach(async () => {
  if (!server) return;
  server.closeAllConnections();
  await new Promise((r) => server!.close(r));
  server = undefined;
});

const request = { model: "m", prompt: "hi" };
const line = (e: GenerationStreamEvent) => JSON.stringify(e) + "\n";
const done: GenerationStreamEvent = {
  type: "done",
  usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
} as GenerationStreamEvent;

async function collect(events: AsyncIterable<GenerationStreamEvent>) {
  const out: GenerationStreamEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}

describe("InferenceClient", () => {
  it("sends the secret and the JSON request, and reads events split anywhere, even inside a character", async () => {
    let seen: { auth?: string; body?: string } = {};
    const client = await serve((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        seen = { auth: req.headers.authorization, body };
        res.writeHead(200, { "content-type": "application/x-ndjson" });
        const bytes = Buffer.from(
          line({ type: "delta", index: 0, text: "héllo ✓" } as GenerationStreamEvent) + line(done),
        );
        // One byte per write, with pauses: every boundary, including inside "é" and "✓".
        let i = 0;
        const next = () => {
          if (i === bytes.length) return res.end();
          res.write(bytes.subarray(i, ++i));
          setImmediate(next);
        };
        next();
      });
    });
    const events = await collect(await client.open(request));
    expect(seen).toEqual({ auth: "Bearer s3cret", body: JSON.stringify(request) });
    expect(events.map((e) => e.type)).toEqual(["delta", "done"]);
    expect((events[0] as { text: string }).text).toBe("héllo ✓");
  });

  it("turns an error status into an InferenceError with the worker's type, message and param", async () => {
    const client = await serve((_req, res) => {
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { type: "invalid_request", message: "bad top_p", param: "top_p" } }));
    });
    const err = await client.open(request).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InferenceError);
    expect(err).toMatchObject({ status: 400, type: "invalid_request", message: "bad top_p", param: "top_p" });
  });

  it("reports a status whose body is not the worker's JSON by its status", async () => {
    const client = await serve((_req, res) => {
      res.writeHead(502);
      res.end("<html>bad gateway</html>");
    });
    await expect(client.generate(request)).rejects.toMatchObject({
      status: 502,
      type: "internal",
      message: "HTTP 502",
    });
  });

  it("ends with an InferenceError when the worker goes away mid-stream, never with a silent end", async () => {
    const client = await serve((_req, res) => {
      res.writeHead(200);
      res.write(line({ type: "delta", index: 0, text: "partial" } as GenerationStreamEvent));
      setTimeout(() => res.socket!.destroy(), 20);
    });
    const seen: string[] = [];
    const err = await (async () => {
      for await (const e of await client.open(request)) seen.push(e.type);
    })().catch((e: unknown) => e);
    expect(seen).toEqual(["delta"]);
    expect(err).toBeInstanceOf(InferenceError);
    expect(err).toMatchObject({ status: 502 });
  });

  it("a stream that ends cleanly but without `done` is not a complete result either", async () => {
    const client = await serve((_req, res) => {
      res.writeHead(200);
      res.end(line({ type: "delta", index: 0, text: "cut" } as GenerationStreamEvent));
    });
    await expect(collect(await client.open(request))).rejects.toMatchObject({ status: 502 });
  });

  it("rejects with the connection's own error (not an InferenceError) when nobody listens", async () => {
    const client = await serve(() => {});
    await new Promise((r) => server!.close(r)); // the port was just free: now nobody listens on it
    server = undefined;
    const err = await client.open(request).catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(InferenceError);
    expect(err).toMatchObject({ code: "ECONNREFUSED" });
  });

  it("an aborted signal closes the connection (the worker cancels) and surfaces as an AbortError", async () => {
    let closed!: () => void;
    const serverSawClose = new Promise<void>((r) => (closed = r));
    const client = await serve((req, res) => {
      res.writeHead(200);
      res.write(line({ type: "delta", index: 0, text: "a" } as GenerationStreamEvent));
      res.on("close", closed);
    });
    const controller = new AbortController();
    const events = await client.open(request, { signal: controller.signal });
    const err = await (async () => {
      for await (const e of events) if (e.type === "delta") controller.abort();
    })().catch((e: unknown) => e);
    expect(err).toMatchObject({ name: "AbortError" });
    await serverSawClose;
  });

  it("sends again on a new connection when a reused keep-alive connection turns out closed", async () => {
    const requestsOn = new Map<Socket, number>();
    let answered = 0;
    const client = await serve((req, res) => {
      const n = (requestsOn.get(req.socket) ?? 0) + 1;
      requestsOn.set(req.socket, n);
      // The second request on a kept-alive connection finds it closed, as when the worker's
      // idle timeout and the client's reuse cross.
      if (n > 1) return req.socket.destroy();
      answered++;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ choices: [], usage: {} }));
    });
    await client.generate(request);
    await client.generate(request);
    expect(answered).toBe(2);
    expect(requestsOn.size).toBe(2);
  });

  describe("timeouts: a frozen worker never holds a request forever", () => {
    it("gives up on a worker that accepts the connection but never answers", async () => {
      const client = await serve(() => {}, { responseMs: 300 }); // reads nothing, answers nothing
      const t0 = Date.now();
      await expect(client.generate(request)).rejects.toBeInstanceOf(WorkerTimeoutError);
      expect(Date.now() - t0).toBeLessThan(2_000);
    });

    it("ends a stream whose worker goes silent mid-answer, and a silent non-streamed answer", async () => {
      const client = await serve(
        (_req, res) => {
          res.writeHead(200, { "content-type": "application/x-ndjson" });
          res.write(line({ type: "delta", index: 0, text: "a" } as GenerationStreamEvent));
        },
        { idleMs: 300 },
      );
      const events = await client.open(request);
      await expect(collect(events)).rejects.toMatchObject({ status: 504 });
      await expect(client.generate(request)).rejects.toMatchObject({ status: 504 });
    });

    it("waits as long as the worker keeps the answer alive with blank lines", async () => {
      const client = await serve(
        (_req, res) => {
          res.writeHead(200, { "content-type": "application/x-ndjson" });
          let beats = 0;
          const beat = setInterval(() => {
            if (++beats < 6) return void res.write("\n"); // 6 × 100 ms: twice the idle timeout
            clearInterval(beat);
            res.end(line({ type: "delta", index: 0, text: "late" } as GenerationStreamEvent) + line(done));
          }, 100);
        },
        { idleMs: 300 },
      );
      const events = await collect(await client.open(request));
      expect(events.map((e) => e.type)).toEqual(["delta", "done"]);
    });

    it("reads an error body that replaces a non-streamed result after the answer started", async () => {
      const client = await serve((_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end("   " + JSON.stringify({ error: { type: "internal", message: "forward pass failed" } }));
      });
      await expect(client.generate(request)).rejects.toMatchObject({ status: 500, message: "forward pass failed" });
    });
  });
});
