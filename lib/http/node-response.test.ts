import { once } from "node:events";
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { sendEvents } from "./node-response";

/**
 * A server whose one answer is `sendEvents` over `source`, recording the socket writes (each as
 * text) and what had been written when `onStart` ran.
 */
async function serve(source: () => AsyncIterable<string>, keepAliveMs?: number) {
  const writes: string[] = [];
  let writtenAtStart: string[] | undefined;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    // What goes to the network, one entry per write to the socket's handle (a corked socket's
    // writes go out together, as one writev).
    const socket = res.socket as Socket & {
      _write: (chunk: Buffer | string, encoding: string, cb: () => void) => void;
      _writev: (chunks: { chunk: Buffer | string }[], cb: () => void) => void;
    };
    const text = (c: Buffer | string) => (Buffer.isBuffer(c) ? c.toString() : String(c));
    const write = socket._write.bind(socket);
    const writev = socket._writev.bind(socket);
    socket._write = (chunk, encoding, cb) => {
      writes.push(text(chunk));
      write(chunk, encoding, cb);
    };
    socket._writev = (chunks, cb) => {
      writes.push(chunks.map((c) => text(c.chunk)).join(""));
      writev(chunks, cb);
    };
    void sendEvents(res, source(), {
      controller: new AbortController(),
      requestId: "req_test",
      onStart: () => (writtenAtStart = [...writes]),
      keepAliveMs,
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  servers.push(server);
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    writes,
    writtenAtStart: () => writtenAtStart,
  };
}

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** The answer: when its head came (ms after the request), and its body. */
function fetchEvents(url: string): Promise<{ headAt: number; body: string; status: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    request(url, { agent: false }, (res) => {
      const headAt = performance.now() - started;
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ headAt, body, status: res.statusCode ?? 0 }));
    })
      .on("error", reject)
      .end();
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("sendEvents", () => {
  it("sends the head with the first frame when that frame is ready at once, then runs onStart", async () => {
    const s = await serve(async function* () {
      yield "data: one\n\n";
      await sleep(20);
      yield "data: two\n\n";
    });
    const answer = await fetchEvents(s.url);
    expect(answer.status).toBe(200);
    expect(answer.body).toBe("data: one\n\ndata: two\n\n");
    // One write carried both: the client wakes once for its first token.
    expect(s.writes[0]).toMatch(/^HTTP\/1\.1 200 OK\r\n[^]*\r\n\r\n[^]*data: one\n\n/);
    // The log line and the metric come after the first token has gone out, not ahead of it.
    expect(s.writtenAtStart()).toEqual([s.writes[0]]);
  });

  it("sends the head at once when the first frame is not ready, so the client sees the answer start", async () => {
    const s = await serve(async function* () {
      await sleep(300);
      yield "data: late\n\n";
    });
    const answer = await fetchEvents(s.url);
    expect(answer.body).toBe("data: late\n\n");
    expect(answer.headAt).toBeLessThan(250);
    expect(s.writes[0]).toMatch(/^HTTP\/1\.1 200 OK\r\n[^]*\r\n\r\n$/);
    // onStart ran with the head, before the frame was there.
    expect(s.writtenAtStart()).toEqual([s.writes[0]]);
  });

  it("writes a keep-alive comment while no frame comes for a while, none while frames flow", async () => {
    const s = await serve(async function* () {
      await sleep(400); // a queue, a long prefill, an upstream thinking
      yield "data: first\n\n";
      for (let i = 0; i < 10; i++) {
        await sleep(20);
        yield `data: ${i}\n\n`;
      }
    }, 100);
    const answer = await fetchEvents(s.url);
    // Before: nothing for as long as the first frame took (a proxy's idle timeout cut the stream).
    const head = answer.body.slice(0, answer.body.indexOf("data: first"));
    expect(head.match(/^: keep-alive\n\n/gm)?.length).toBeGreaterThanOrEqual(2);
    expect(answer.body.slice(head.length)).not.toContain("keep-alive");
    expect(answer.body).toContain("data: 9\n\n");
  });

  it("answers a stream with no frame, and still runs onStart", async () => {
    const s = await serve(async function* () {});
    const answer = await fetchEvents(s.url);
    expect(answer.status).toBe(200);
    expect(answer.body).toBe("");
    expect(s.writtenAtStart()).toBeDefined();
  });
});
