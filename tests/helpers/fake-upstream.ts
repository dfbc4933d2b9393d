// A small OpenAI-compatible server on a real socket, speaking the dialect of one upstream kind
// (vLLM, TGI, llama.cpp, Ollama, plain OpenAI): it records what it received and answers with
// server-sent events in OpenAI's shapes (vLLM adds `stop_reason`), or misbehaves on demand.
import http, { type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import type { UpstreamKind } from "@/lib/contracts/upstream";

export type Received = { path: string; headers: IncomingHttpHeaders; body: Record<string, any> };

export type FakeMode =
  | { type: "ok"; tokens?: string[]; finish?: "stop" | "length"; stopReason?: string; usage?: boolean }
  /** Answers `status` with OpenAI's error body (a 4xx relayed, a 5xx failed over). */
  | { type: "status"; status: number; message: string }
  /** Accepts the connection and never answers. */
  | { type: "silent" }
  /** Answers 200 and one token, then goes silent. */
  | { type: "stall-mid" }
  /** Answers 200 and one token, then closes the connection without finishing. */
  | { type: "cut" }
  /** One JSON answer though a stream was asked for (a server that does not stream). */
  | { type: "json"; text: string }
  /**
   * An event stream written exactly as given: each string or bytes in one write, a number a
   * pause of that many ms, a function awaited (the test decides when the upstream goes on).
   */
  | { type: "raw"; writes: (string | Buffer | number | (() => Promise<void>))[] };

export type FakeUpstream = {
  url: string;
  kind: UpstreamKind;
  received: Received[];
  mode: FakeMode;
  /** TCP connections accepted so far (a kept-alive connection counts once). */
  connections: number;
  /** Requests whose connection the caller closed before the answer was complete. */
  abandoned: number;
  close: () => Promise<void>;
};

export const DEFAULT_TOKENS = ["Hello", ",", " upstream", " world"];

/** One text-completion event as OpenAI's servers stream it, for a `raw` mode's writes. */
export const completionEvent = (text: string, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: "c", object: "text_completion", model: "m", choices: [{ index: 0, text, logprobs: null, finish_reason: finish }] })}\n\n`;

export async function startFakeUpstream(kind: UpstreamKind, mode: FakeMode = { type: "ok" }): Promise<FakeUpstream> {
  const sockets = new Set<import("node:net").Socket>();
  const fake: FakeUpstream = {
    url: "",
    kind,
    received: [],
    mode,
    connections: 0,
    abandoned: 0,
    close: async () => {},
  };
  const server = http.createServer((req, res) => {
    res.once("close", () => {
      if (!res.writableFinished) fake.abandoned++;
    });
    let raw = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (raw += c));
    req.on("end", () => {
      let body: Record<string, any> = {};
      try {
        body = JSON.parse(raw) as Record<string, any>;
      } catch {
        // recorded as empty
      }
      fake.received.push({ path: req.url ?? "", headers: req.headers, body });
      answer(kind, fake.mode, req.url ?? "", body, res);
    });
  });
  server.on("connection", (s) => {
    sockets.add(s);
    fake.connections++;
    s.once("close", () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.close = () =>
    new Promise((r) => {
      for (const s of sockets) s.destroy();
      server.close(() => r());
    });
  return fake;
}

/** A port nothing listens on (bound, then closed): connections to it are refused. */
export async function refusedUrl(): Promise<string> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return `http://127.0.0.1:${port}`;
}

function answer(kind: UpstreamKind, mode: FakeMode, path: string, body: Record<string, any>, res: http.ServerResponse) {
  const chat = path === "/v1/chat/completions";
  if (path !== "/v1/completions" && !chat) {
    res.writeHead(404, { "content-type": "application/json" });
    return res.end(JSON.stringify({ error: { message: `no route ${path}` } }));
  }
  if (mode.type === "status") {
    res.writeHead(mode.status, { "content-type": "application/json" });
    // TGI answers `{error: "…"}`, the others OpenAI's `{error: {message}}`.
    return res.end(JSON.stringify(kind === "tgi" ? { error: mode.message } : { error: { message: mode.message } }));
  }
  if (mode.type === "silent") return;
  const model = String(body.model);
  const n = Number(body.n ?? 1);
  if (mode.type === "json") {
    res.writeHead(200, { "content-type": "application/json" });
    return res.end(
      JSON.stringify({
        id: "cmpl-fake",
        object: chat ? "chat.completion" : "text_completion",
        model,
        choices: [
          chat
            ? { index: 0, message: { role: "assistant", content: mode.text }, finish_reason: "stop" }
            : { index: 0, text: mode.text, finish_reason: "stop" },
        ],
        usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
      }),
    );
  }
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  if (mode.type === "raw") {
    void (async () => {
      for (const w of mode.writes) {
        if (typeof w === "string" || Buffer.isBuffer(w)) res.write(w);
        else if (typeof w === "number") await new Promise((r) => setTimeout(r, w));
        else await w();
      }
      res.end();
    })();
    return;
  }
  const send = (chunk: unknown) => res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  const piece = (index: number, text: string, i: number) => {
    const k = Number(chat ? (body.top_logprobs ?? 0) : (body.logprobs ?? 0));
    const wantLogprobs = chat ? body.logprobs === true : body.logprobs !== undefined;
    const logprobs = !wantLogprobs
      ? null
      : chat
        ? {
            content: [
              {
                token: text,
                logprob: -0.5 - i,
                top_logprobs: Array.from({ length: k }, (_, j) => ({ token: `alt${j}`, logprob: -1 - j })),
              },
            ],
          }
        : {
            tokens: [text],
            token_logprobs: [-0.5 - i],
            top_logprobs: [
              Object.fromEntries([[text, -0.5 - i], ...Array.from({ length: k }, (_, j) => [`alt${j}`, -1 - j])]),
            ],
            text_offset: [0],
          };
    const choice = chat
      ? {
          index,
          delta: i === 0 ? { role: "assistant", content: text } : { content: text },
          logprobs,
          finish_reason: null,
        }
      : { index, text, logprobs, finish_reason: null };
    return { id: "cmpl-fake", object: chat ? "chat.completion.chunk" : "text_completion", model, choices: [choice] };
  };
  if (mode.type === "stall-mid" || mode.type === "cut") {
    send(piece(0, "Hello", 0));
    if (mode.type === "cut") setTimeout(() => res.socket?.destroy(), 50);
    return;
  }
  const tokens = mode.tokens ?? DEFAULT_TOKENS;
  // The prompt "slow" is answered one token every 150 ms (a request that stays in flight).
  if (body.prompt === "slow") {
    let i = 0;
    const timer = setInterval(() => {
      if (i < tokens.length) return send(piece(0, tokens[i]!, i++));
      clearInterval(timer);
      send({ id: "cmpl-fake", model, choices: [{ index: 0, text: "", finish_reason: "stop" }] });
      res.end("data: [DONE]\n\n");
    }, 150);
    return;
  }
  for (let index = 0; index < n; index++) {
    tokens.forEach((t, i) => send(piece(index, t, i)));
    const finish = mode.finish ?? "stop";
    const last: Record<string, unknown> = chat
      ? { index, delta: {}, logprobs: null, finish_reason: finish }
      : { index, text: "", logprobs: null, finish_reason: finish };
    if (kind === "vllm") last.stop_reason = mode.stopReason ?? null;
    send({ id: "cmpl-fake", model, choices: [last] });
  }
  if (mode.usage !== false && body.stream_options?.include_usage)
    send({
      id: "cmpl-fake",
      model,
      choices: [],
      usage: { prompt_tokens: 7, completion_tokens: tokens.length * n, total_tokens: 7 + tokens.length * n },
    });
  res.end("data: [DONE]\n\n");
}
