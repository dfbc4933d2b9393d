// The upstream backend: a deployment served by OpenAI-compatible servers (vLLM, TGI, llama.cpp,
// Ollama, OpenAI itself) that the app calls directly. It yields the same generation events as
// the workers (lib/contracts/generation), so every endpoint, shape, meter and limit works unchanged.
//
// Resilience: the deployment's URLs are tried least-busy first (in-flight requests of this
// process); a refused connection, a timeout or a 5xx before the answer starts goes to the next
// URL, and a URL that failed so is avoided for UPSTREAM_AVOID_MS by the team whose request saw it
// fail, then probed again (another team's requests, which may have caused the failure, never take
// a URL out of a team's rotation). A 4xx is the request's own and comes back with its status and
// the upstream's message.
import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import { shownUrl, type UpstreamKind } from "../../contracts/upstream";
import type {
  GeneratedTokenLogprobs,
  GenerationRequestInput,
  GenerationResult,
  GenerationStreamEvent,
  GenerationUsage,
} from "../../contracts/generation";
import { env } from "../../env";
import { boundedRequest } from "../../net/bounded-request";
import { allowedUpstream, checkedLookup, localLiteral, LocalUpstreamError } from "../../net/upstream-hosts";
import { abortedError, ApiError, type ErrorType } from "../../errors";
import { logger } from "../../observe/log";
import { appMetrics, metricsEnabled } from "../../observe/metrics";
import { InferenceError, type CallOptions } from "../client";
import { batchedEvents, type GenerationEvents } from "../batches";
import { BACKEND_LABEL, upstreamBody } from "./capabilities";

export type UpstreamTarget = {
  kind: UpstreamKind;
  urls: string[];
  model: string;
  key?: string;
  /** The team whose deployment this is: a URL failing its requests is avoided for it alone. */
  teamId?: string;
  /**
   * Refuse a connection whose host resolves to this machine or a link-local address, unless
   * UPSTREAM_ALLOWED_HOSTS lists it (deployments made by a team's owner: lib/net/upstream-hosts.ts).
   */
  checkHosts?: boolean;
};

export type UpstreamTimeouts = { connectMs: number; firstByteMs: number; idleMs: number };

const httpAgent = new http.Agent({ keepAlive: true, scheduling: "lifo" });
const httpsAgent = new https.Agent({ keepAlive: true, scheduling: "lifo" });
// Their own agents, so that a connection checked once is never reused unchecked, nor the reverse.
const checkedHttpAgent = new http.Agent({ keepAlive: true, scheduling: "lifo", lookup: checkedLookup });
const checkedHttpsAgent = new https.Agent({ keepAlive: true, scheduling: "lifo", lookup: checkedLookup });

/**
 * The agent to reach `url` with: for hosts a team's owner chose (`checkHosts`) and the operator
 * has not listed, one whose lookup refuses local addresses; an IP literal (never looked up) is
 * refused here (the list may have changed since the deployment was made).
 */
function agentFor(url: string, checkHosts: boolean | undefined): http.Agent {
  const secure = url.startsWith("https:");
  if (!checkHosts || allowedUpstream(url, env().UPSTREAM_ALLOWED_HOSTS)) return secure ? httpsAgent : httpAgent;
  const literal = localLiteral(url);
  if (literal) throw new LocalUpstreamError(literal, literal);
  return secure ? checkedHttpsAgent : checkedHttpAgent;
}

type UpstreamHealth = {
  /** Requests this process has open per URL: the balancing weight. */
  inFlight: Map<string, number>;
  /** URLs that failed before answering, and until when they are passed over (by avoidKey). */
  avoidUntil: Map<string, number>;
  turn: number;
};
/**
 * One per process, on globalThis: Next.js loads this module once in each router's bundle, and
 * the balancing and the metrics must see every request of the process.
 */
const health: UpstreamHealth = ((globalThis as { __lmpUpstreamHealth?: UpstreamHealth }).__lmpUpstreamHealth ??= {
  inFlight: new Map(),
  avoidUntil: new Map(),
  turn: 0,
});
const { inFlight, avoidUntil } = health;

/** Where a team's avoidance of `url` is kept in avoidUntil (a URL holds no newline). */
const avoidKey = (teamId: string | undefined, url: string) => `${teamId ?? ""}\n${url}`;
const urlOfAvoidKey = (key: string) => key.slice(key.indexOf("\n") + 1);

/** For tests: forget which URLs failed. */
export function resetUpstreamHealth() {
  avoidUntil.clear();
}

/** A request to `url` is over. A URL with none open is forgotten (a deleted deployment's too). */
function settled(url: string) {
  const n = (inFlight.get(url) ?? 1) - 1;
  if (n > 0) inFlight.set(url, n);
  else inFlight.delete(url);
}

/**
 * The upstream URLs that have requests open or are being passed over, as shown (user information
 * hidden; URLs that differ only there are added up). A URL whose time to be passed over is up is
 * forgotten here: it no longer changes the order URLs are tried in.
 */
export function upstreamHealth(now = Date.now()): { upstream: string; inFlight: number; avoided: boolean }[] {
  for (const [key, until] of avoidUntil) if (until <= now) avoidUntil.delete(key);
  const avoided = new Set([...avoidUntil.keys()].map(urlOfAvoidKey)); // by any team
  const shown = new Map<string, { upstream: string; inFlight: number; avoided: boolean }>();
  for (const url of new Set([...inFlight.keys(), ...avoided])) {
    const upstream = shownUrl(url);
    const h = shown.get(upstream) ?? { upstream, inFlight: 0, avoided: false };
    h.inFlight += inFlight.get(url) ?? 0;
    h.avoided ||= avoided.has(url);
    shown.set(upstream, h);
  }
  return [...shown.values()];
}

/** How a request to one upstream URL began (`lmp_upstream_requests_total`). */
type UpstreamOutcome = "ok" | "client_error" | "server_error" | "timeout" | "unreachable";

const counted = (url: string, outcome: UpstreamOutcome) => {
  if (metricsEnabled()) appMetrics().upstreamRequests.inc({ upstream: shownUrl(url), outcome });
};

/** An answer from `url` that began and then broke off (`lmp_upstream_broken_streams_total`). */
const brokeOff = (url: string) => {
  if (metricsEnabled()) appMetrics().upstreamBroken.inc({ upstream: shownUrl(url) });
};

/** The connection or the answer's first byte took too long. */
class UpstreamTimeoutError extends Error {}

/** How a request that failed before its answer began failed. */
function outcomeOf(e: unknown): UpstreamOutcome {
  if (e instanceof UpstreamStatusError) return e.status < 500 ? "client_error" : "server_error";
  return e instanceof UpstreamTimeoutError ? "timeout" : "unreachable";
}

/**
 * The order to try `urls` in: URLs in good standing by fewest in-flight requests (ties rotate),
 * then at most one avoided URL whose time is up soonest, so a deployment whose every URL is down
 * answers in one connection attempt, and a URL that came back is found again.
 */
export function tryOrder(urls: string[], teamId: string | undefined, now = Date.now()): string[] {
  const start = health.turn++ % urls.length;
  const rotated = [...urls.slice(start), ...urls.slice(0, start)];
  const until = (u: string) => avoidUntil.get(avoidKey(teamId, u)) ?? 0;
  const good = rotated.filter((u) => until(u) <= now);
  good.sort((a, b) => (inFlight.get(a) ?? 0) - (inFlight.get(b) ?? 0));
  const bad = rotated.filter((u) => until(u) > now);
  bad.sort((a, b) => until(a) - until(b));
  return good.length > 0 ? good : bad.slice(0, 1);
}

const timeoutsFromEnv = (): UpstreamTimeouts => {
  const e = env();
  return {
    connectMs: e.UPSTREAM_CONNECT_TIMEOUT_MS,
    firstByteMs: e.UPSTREAM_FIRST_BYTE_TIMEOUT_MS,
    idleMs: e.UPSTREAM_IDLE_TIMEOUT_MS,
  };
};

/** An upstream answered with a status outside 2xx (its message read from OpenAI's error body or the text). */
class UpstreamStatusError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** 401, 403 and 407 refuse the deployment's own key (or a proxy's), never the caller's. */
const refusedCredentials = (status: number) => status === 401 || status === 403 || status === 407;

const relayedType = (status: number): ErrorType =>
  (
    ({
      404: "not_found",
      409: "conflict",
      413: "payload_too_large",
      429: "rate_limited",
    }) as Record<number, ErrorType>
  )[status] ?? "invalid_request";

const relayed = (e: UpstreamStatusError, backend: string) =>
  new ApiError(e.status, relayedType(e.status), `The ${backend} upstream answered ${e.status}: ${e.message}`);

/**
 * Starts a streamed generation on the upstream and resolves once one URL has accepted it (a 2xx),
 * so refusals, relayed 4xx and "all URLs down" are still plain HTTP errors.
 */
export async function openUpstream(
  target: UpstreamTarget,
  request: GenerationRequestInput,
  call: CallOptions = {},
  timeouts: UpstreamTimeouts = timeoutsFromEnv(),
): Promise<GenerationEvents> {
  const { endpoint, body } = upstreamBody(target.kind, target.model, request);
  const payload = JSON.stringify(body);
  const path = endpoint === "chat" ? "/v1/chat/completions" : "/v1/completions";
  const backend = BACKEND_LABEL[target.kind];
  const avoidMs = env().UPSTREAM_AVOID_MS;
  let answered5xx: UpstreamStatusError | undefined;
  let busy: UpstreamStatusError | undefined;
  let missing: UpstreamStatusError | undefined;
  let lastError: Error | undefined;
  for (const url of tryOrder(target.urls, target.teamId)) {
    inFlight.set(url, (inFlight.get(url) ?? 0) + 1);
    let res: IncomingMessage;
    try {
      res = await post(url + path, payload, target, call, timeouts);
    } catch (e) {
      settled(url);
      if (call.signal?.aborted) throw abortedError(call.signal);
      counted(url, outcomeOf(e));
      // A 429 says that server is busy (TGI's full queue), not that the request is wrong: the next
      // URL may take it. So does a 404: the path and the model are the deployment's, not the
      // caller's, so it is that server lacking the model (an Ollama that has not pulled it, a vLLM
      // serving another). Any other 4xx is the request's own.
      const answered = e instanceof UpstreamStatusError ? e : undefined;
      if (answered && refusedCredentials(answered.status)) {
        // The deployment's key, not the caller's: relayed as a 401, OpenAI clients told their user
        // that *their* key was wrong, and OpenAI's message showed part of the operator's key.
        logger().warn(
          { upstream: shownUrl(url), status: answered.status, message: answered.message },
          "the upstream refused the deployment's credentials",
        );
        throw new ApiError(
          502,
          "internal",
          `The ${backend} upstream refused this deployment's credentials (${answered.status}): its upstream key is ` +
            "missing, wrong or rotated; the deployment's owner or the operator can set it again.",
        );
      }
      if (answered && answered.status < 400)
        throw new ApiError(
          502,
          "internal",
          `The ${backend} upstream answered ${answered.status} (a redirect), not a completion: check the deployment's upstream URL (https?).`,
        );
      if (answered && answered.status < 500 && answered.status !== 429 && answered.status !== 404)
        throw relayed(answered, backend);
      if (answered?.status === 429) busy = answered;
      else if (answered?.status === 404) missing = answered;
      else if (answered) answered5xx = answered;
      lastError = e as Error;
      // A 404 is about this deployment's model only: the server stays in the rotation of the
      // team's other deployments on it.
      if (answered?.status !== 404) avoidUntil.set(avoidKey(target.teamId, url), Date.now() + avoidMs);
      logger().warn({ upstream: shownUrl(url), err: e }, "upstream failed before answering");
      continue;
    }
    avoidUntil.delete(avoidKey(target.teamId, url));
    counted(url, "ok");
    // In flight until its connection's answer is over, however it ends (even if never read).
    res.once("close", () => settled(url));
    return readUpstream(res, url, request, backend, call.signal);
  }
  if (lastError instanceof LocalUpstreamError)
    throw new ApiError(
      502,
      "internal",
      `The ${backend} upstream ${lastError.message}, which a deployment made from the dashboard may not ` +
        "reach; the operator may allow it (UPSTREAM_ALLOWED_HOSTS).",
    );
  if (answered5xx)
    throw new ApiError(
      502,
      "internal",
      `Every ${backend} upstream of this deployment failed; the last answered ${answered5xx.status}: ${answered5xx.message}`,
    );
  if (busy)
    throw new ApiError(
      429,
      "rate_limited",
      `Every ${backend} upstream of this deployment is busy (429: ${busy.message}); retry shortly.`,
      undefined,
      { "retry-after": String(Math.ceil(avoidMs / 1000)) },
    );
  if (missing) throw relayed(missing, backend); // no URL has the model: its 404 as it was
  throw new ApiError(
    503,
    "internal",
    // What failed is in the log (above): addresses of the servers are not the caller's business.
    `No ${backend} upstream of this deployment can be reached right now${lastError ? "" : " (each failed a moment ago)"}; retry shortly.`,
    undefined,
    { "retry-after": String(Math.ceil(avoidMs / 1000)) },
  );
}

/** A whole generation (the non-streamed answers), collected from the stream. */
export async function generateUpstream(
  target: UpstreamTarget,
  request: GenerationRequestInput,
  call: CallOptions = {},
  onOpen?: (events: GenerationEvents) => void,
): Promise<GenerationResult> {
  const events = await openUpstream(target, request, call);
  onOpen?.(events);
  const choices = new Map<number, GenerationResult["choices"][number]>();
  const choice = (index: number) => {
    let c = choices.get(index);
    if (!c)
      choices.set(
        index,
        (c = { index, text: "", finish_reason: "length", stop: null, logprobs: request.logprobs ? [] : null }),
      );
    return c;
  };
  let usage: GenerationUsage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
  try {
    for await (const e of events) {
      if (e.type === "delta") {
        const c = choice(e.index);
        c.text += e.text;
        if (e.logprobs && c.logprobs) c.logprobs.push(...e.logprobs);
      } else if (e.type === "finish") Object.assign(choice(e.index), { finish_reason: e.finish_reason, stop: e.stop });
      else if (e.type === "done") usage = e.usage;
    }
  } catch (e) {
    // Broke off after it started: the answer is lost, and says why.
    if (e instanceof InferenceError) throw new ApiError(e.status >= 500 ? e.status : 502, "internal", e.message);
    throw e;
  }
  for (let i = 0; i < (request.n ?? 1); i++) choice(i);
  return { model: target.model, choices: [...choices.values()].sort((a, b) => a.index - b.index), usage };
}

function post(
  url: string,
  payload: string,
  { key, checkHosts }: Pick<UpstreamTarget, "key" | "checkHosts">,
  call: CallOptions,
  { connectMs, firstByteMs, idleMs }: UpstreamTimeouts,
): Promise<IncomingMessage> {
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "content-length": String(Buffer.byteLength(payload)),
    accept: "text/event-stream",
  };
  if (key) headers.authorization = `Bearer ${key}`;
  if (call.requestId) headers["x-request-id"] = call.requestId;
  return boundedRequest({
    url,
    method: "POST",
    headers,
    body: payload,
    agent: agentFor(url, checkHosts),
    signal: call.signal,
    bounds: { connectMs, firstByteMs, idleMs },
    peer: "the upstream",
    timeoutError: (message) => new UpstreamTimeoutError(message),
    idleError: (message) => new InferenceError(504, "internal", message),
    refused: async (res) => {
      const status = res.statusCode ?? 0;
      const text = await readAll(res).catch(() => undefined);
      return new UpstreamStatusError(status, text === undefined ? `HTTP ${status}` : errorMessage(text, status));
    },
  });
}

async function readAll(res: IncomingMessage): Promise<string> {
  res.setEncoding("utf8");
  let text = "";
  for await (const chunk of res) {
    text += chunk as string;
    if (text.length > 64 * 1024) break;
  }
  return text;
}

/** OpenAI's `{error: {message}}`, TGI's `{error: "…"}`, Ollama's, or the text itself (shortened). */
function errorMessage(text: string, status: number): string {
  try {
    const body = JSON.parse(text) as { error?: string | { message?: string }; message?: string; detail?: unknown };
    const m =
      typeof body.error === "string"
        ? body.error
        : (body.error?.message ?? body.message ?? (body.detail ? JSON.stringify(body.detail) : undefined));
    if (m) return m.slice(0, 1000);
  } catch {
    // not JSON
  }
  return text.trim().slice(0, 1000) || `HTTP ${status}`;
}

type UpstreamLogprobs = {
  // text completions
  tokens?: string[];
  token_logprobs?: (number | null)[];
  top_logprobs?: (Record<string, number> | null)[] | null;
  // chat
  content?: { token: string; logprob: number; top_logprobs?: { token: string; logprob: number }[] }[] | null;
};
type UpstreamChoice = {
  index?: number;
  text?: string;
  delta?: { content?: string | null };
  message?: { content?: string | null };
  logprobs?: UpstreamLogprobs | null;
  finish_reason?: string | null;
  stop_reason?: string | number | null;
};
type UpstreamChunk = {
  choices?: UpstreamChoice[];
  usage?: { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number } | null;
  error?: string | { message?: string };
};

/** The platform's logprob entries for one chunk (the token ids are not known: -1). */
function toLogprobs(lp: UpstreamLogprobs | null | undefined, k: number): GeneratedTokenLogprobs[] | undefined {
  if (!lp) return undefined;
  if (lp.content)
    return lp.content.map((t) => ({
      token: t.token,
      token_id: -1,
      logprob: t.logprob,
      top_logprobs: (t.top_logprobs ?? [])
        .slice(0, k)
        .map((a) => ({ token: a.token, token_id: -1, logprob: a.logprob })),
    }));
  if (!lp.tokens) return undefined;
  return lp.tokens.map((token, i) => ({
    token,
    token_id: -1,
    logprob: lp.token_logprobs?.[i] ?? 0,
    top_logprobs: Object.entries(lp.top_logprobs?.[i] ?? {})
      .sort((a, b) => b[1] - a[1])
      .slice(0, k)
      .map(([t, logprob]) => ({ token: t, token_id: -1, logprob })),
  }));
}

/** A choice's text, however the server's dialect carries it (text, chat delta, chat message). */
const textOf = (c: UpstreamChoice): string => c.text ?? c.delta?.content ?? c.message?.content ?? "";

/**
 * A plain delta event (one choice, text and nothing else: no logprobs, finish, usage or error),
 * split around its text's string literal: an event that is `head` + a string literal + `tail` is
 * the same delta with that text. The token structure of JSON does not depend on what a string
 * literal holds, so this is exact, not a guess.
 */
type PlainTemplate = { head: string; tail: string; index: number; hits: number };

/**
 * What the probes put in a template's slot: each must come out as the text, so the slot is what
 * the text is read from (with one probe, a later duplicate key holding that very value would pass).
 */
const PROBES = ["\u0000slot", "\u0001other"];

/** A plain chunk's one choice (see PlainTemplate), or undefined. */
function plainChoice(chunk: UpstreamChunk): UpstreamChoice | undefined {
  if (chunk.error || chunk.usage || chunk.choices?.length !== 1) return undefined;
  const c = chunk.choices[0]!;
  return c.logprobs || c.finish_reason ? undefined : c;
}

/**
 * A copy of `s` of its own: V8's slices keep the whole string they were cut from alive, and a
 * template lives as long as its stream, while the read it came from may be 64 kB.
 */
const ownCopy = (s: string) => (s + " ").slice(0, -1);

const skipSpace = (s: string, i: number) => {
  while (i < s.length && (s.charCodeAt(i) === 32 || s.charCodeAt(i) === 9)) i++;
  return i;
};

/**
 * The template of `data` (parsed as `chunk`) if it is a plain delta with text: the string literal
 * of a `"text"` or `"content"` member, checked by parsing the event with probe texts in its place
 * (each probe must come out as the text, the rest still plain; a duplicate key or a nested member
 * of that name fails it). As the token structure is the same whatever the slot holds, every other
 * value the parser reads is the same as in `data`: plain.
 */
function plainTemplate(data: string, chunk: UpstreamChunk): PlainTemplate | undefined {
  const c = plainChoice(chunk);
  if (!c || !textOf(c)) return undefined;
  const key = typeof c.text === "string" ? '"text"' : '"content"';
  for (let at = data.indexOf(key); at >= 0; at = data.indexOf(key, at + key.length)) {
    let q = skipSpace(data, at + key.length);
    if (data.charCodeAt(q) !== 58) continue; // ':'
    q = skipSpace(data, q + 1);
    if (data.charCodeAt(q) !== 34) continue; // '"'
    let e = q + 1;
    while (e < data.length && data.charCodeAt(e) !== 34) e += data.charCodeAt(e) === 92 ? 2 : 1;
    if (e >= data.length) continue;
    const head = data.slice(0, q);
    const tail = data.slice(e + 1);
    const slotIsText = PROBES.every((text) => {
      const p = plainChoice((jsonOrUndefined(head + JSON.stringify(text) + tail) ?? {}) as UpstreamChunk);
      return p !== undefined && textOf(p) === text && (p.index ?? 0) === (c.index ?? 0);
    });
    if (slotIsText) return { head: ownCopy(head), tail: ownCopy(tail), index: c.index ?? 0, hits: 0 };
  }
  return undefined;
}

/** The value of a JSON text, or undefined when it is not JSON. */
function jsonOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * The string that `s.slice(from, to)` holds as a JSON text, or undefined when it is not exactly one
 * string literal. A short literal without escapes, quotes or control characters is its own
 * content, and is sliced out as it is: a token's text usually is one, and `JSON.parse` would also
 * look the result up in V8's string table (2% of the app's CPU in front of a fast upstream). Only
 * short ones: V8 copies a slice under 13 characters, while a longer one would keep the whole read
 * alive as long as the text (a captured completion holds its texts to the end).
 */
function stringLiteral(s: string, from: number, to: number): string | undefined {
  if (to - from >= 2 && to - from <= 14 && s.charCodeAt(from) === 34 && s.charCodeAt(to - 1) === 34) {
    let i = from + 1;
    for (let c; i < to - 1 && (c = s.charCodeAt(i)) !== 92 && c !== 34 && c >= 32;) i++;
    if (i === to - 1) return s.slice(from + 1, to - 1);
  }
  const v = jsonOrUndefined(s.slice(from, to));
  return typeof v === "string" ? v : undefined;
}

/** The longest line of an upstream's event stream, and the longest JSON answer, read. */
export const MAX_LINE_CHARS = 1 << 20;
export const MAX_ANSWER_CHARS = 8 << 20;

/**
 * The upstream's server-sent events as generation events, fed one network read at a time
 * (`push`): the events of each read come out together, each run of text deltas of a choice
 * (without logprobs) joined into one, so when the upstream is ahead of the app (a fast server, a
 * busy app) the app sends fewer, larger chunks instead of falling further behind. An event split
 * over two reads comes out with the second. Nothing is held back.
 *
 * A server repeats its plain delta events byte for byte but for the text (the same id, model and
 * creation time throughout an answer, as vLLM's are), so after one such event has been parsed
 * whole, the next ones that match its template (`PlainTemplate`) only have their text's literal
 * parsed. A whole `JSON.parse` per token took about 13% of the app's main thread in front of a
 * fast upstream (`npm run bench -- upstream`), as much as its socket writes. An event that does
 * not match is parsed whole, and a plain one becomes the next template (a time that ticks each
 * second costs one template a second); a template that never matched is not replaced (a server
 * whose events all differ, or choices that alternate), so such a stream is parsed whole throughout.
 */
export class UpstreamEventParser {
  /** A line begun in an earlier read. */
  private rest = "";
  private template: PlainTemplate | undefined;
  /** Off once a template went unused: this stream's events do not repeat. */
  private templating = true;
  private readonly finished = new Set<number>();
  /** The choices the upstream sent anything of (text, logprobs or a finish). */
  private readonly seen = new Set<number>();
  private usage: GenerationUsage | undefined;
  private counted = 0;
  /** The upstream sent `data: [DONE]`: whatever follows is ignored. */
  sawDone = false;
  /**
   * Pieces (tokens, or deltas) past which an upstream is taken to ignore max_tokens: twice what
   * was asked, and some; with `echo`, the prompt's tokens come back too (at most 4 per character).
   * Set once: it was worked out again for every piece.
   */
  private readonly maxPieces: number;

  constructor(
    private readonly request: GenerationRequestInput,
    private readonly backend: string,
  ) {
    const n = request.n ?? 1;
    const prompt = request.echo && typeof request.prompt === "string" ? 4 * request.prompt.length : 0;
    this.maxPieces = 2 * (request.max_tokens ?? 16) * n + 16 + prompt * n;
  }

  /** The events of the lines that `text` completes. */
  push(text: string): GenerationStreamEvent[] {
    const out: GenerationStreamEvent[] = [];
    // A read that ends no line only grows the one begun (the rest holds no newline: scanning it
    // again at every read was quadratic in a long line), up to MAX_LINE_CHARS.
    if (text.indexOf("\n") < 0) {
      this.rest += text;
      this.checkLine();
      return out;
    }
    const buffer = this.rest.length > 0 ? this.rest + text : text;
    let start = 0;
    let nl: number;
    while ((nl = buffer.indexOf("\n", start)) >= 0) {
      const line = start;
      start = nl + 1;
      // Blank lines, comments, event names and ids carry nothing here. llama.cpp's server sends a
      // failure met after the headers as an `error: {json}` line (then `data: [DONE]`).
      if (!this.sawDone && buffer.startsWith("error:", line)) {
        const text = buffer.slice(line + 6, nl).trim();
        let error: UpstreamChunk["error"] = text || "unknown error";
        try {
          const parsed = JSON.parse(text) as { message?: string; error?: UpstreamChunk["error"] };
          error = parsed.error ?? parsed;
        } catch {
          // not JSON: the text is the message
        }
        this.chunk({ error }, out);
      }
      if (this.sawDone || !buffer.startsWith("data:", line)) continue;
      let from = line + 5;
      if (buffer.charCodeAt(from) === 32) from++;
      const to = nl > from && buffer.charCodeAt(nl - 1) === 13 ? nl - 1 : nl;
      const t = this.template;
      // Compared as slices: startsWith at a position is several times slower in V8 (~0.5 µs here).
      if (
        t !== undefined &&
        to - from > t.head.length + t.tail.length &&
        buffer.slice(from, from + t.head.length) === t.head &&
        buffer.slice(to - t.tail.length, to) === t.tail
      ) {
        const text = stringLiteral(buffer, from + t.head.length, to - t.tail.length);
        if (text !== undefined) {
          t.hits++;
          if (text) this.delta(t.index, text, undefined, out);
          continue;
        }
      }
      const data = buffer.slice(from, to);
      if (data === "[DONE]") this.sawDone = true;
      else {
        const chunk = JSON.parse(data) as UpstreamChunk;
        this.chunk(chunk, out);
        if (this.templating && (t === undefined || t.hits > 0)) this.template = plainTemplate(data, chunk) ?? t;
        else if (t !== undefined && plainChoice(chunk)) this.templating = false;
      }
    }
    this.rest = start < buffer.length ? buffer.slice(start) : "";
    this.checkLine();
    return out;
  }

  /** The line begun (and not ended) may not grow past MAX_LINE_CHARS. */
  private checkLine(): void {
    if (this.rest.length > MAX_LINE_CHARS) throw this.tooMuch(`a line longer than ${MAX_LINE_CHARS} characters`);
  }

  /** The upstream sent more than any answer to this request holds: a 502, read no further. */
  tooMuch(what: string): InferenceError {
    return new InferenceError(502, "internal", `the ${this.backend} upstream sent ${what}; its answer was cut`);
  }

  /** The events of one JSON answer (a server that does not stream). */
  whole(text: string): GenerationStreamEvent[] {
    const out: GenerationStreamEvent[] = [];
    this.chunk(JSON.parse(text) as UpstreamChunk, out);
    this.sawDone = true;
    return out;
  }

  /**
   * The last events once the answer is complete: a finish for each choice the upstream did not
   * finish, and the usage (counted from the stream when the server reports none). Throws when
   * the upstream stopped before it finished.
   */
  end(): GenerationStreamEvent[] {
    const n = this.request.n ?? 1;
    if (!this.sawDone && this.finished.size < n)
      throw new InferenceError(502, "internal", `the ${this.backend} upstream closed the stream before it finished`);
    // A choice the server never sent a word of (one that ignores n): not an empty answer that
    // ended normally, which capture would have stored as a training sample.
    const missing = Array.from({ length: n }, (_, i) => i).filter((i) => !this.seen.has(i) && !this.finished.has(i));
    if (missing.length > 0)
      throw new InferenceError(
        502,
        "internal",
        `the ${this.backend} upstream sent ${n - missing.length} of the ${n} choices asked for (does it take n?)`,
      );
    const out: GenerationStreamEvent[] = [];
    for (let i = 0; i < n; i++)
      if (!this.finished.has(i)) out.push({ type: "finish", index: i, finish_reason: "stop", stop: null });
    out.push({ type: "done", usage: this.used() });
    return out;
  }

  /** The usage the server reported, else counted from the stream (one token per piece). */
  used(): GenerationUsage {
    const counted = this.counted;
    return this.usage ?? { prompt_tokens: 0, completion_tokens: counted, total_tokens: counted };
  }

  private chunk(chunk: UpstreamChunk, out: GenerationStreamEvent[]): void {
    if (chunk.error) {
      const m = typeof chunk.error === "string" ? chunk.error : (chunk.error.message ?? "unknown error");
      throw new InferenceError(502, "internal", `the ${this.backend} upstream failed: ${String(m).slice(0, 1000)}`);
    }
    const choices = chunk.choices;
    if (choices)
      for (const c of choices) {
        const index = c.index ?? 0;
        this.seen.add(index);
        const text = textOf(c);
        const logprobs = c.logprobs ? toLogprobs(c.logprobs, this.request.logprobs ?? 0) : undefined;
        if (text || logprobs?.length) this.delta(index, text, logprobs, out);
        if (c.finish_reason && !this.finished.has(index)) {
          // vLLM's `abort` (the engine dropped the request) and `error`: not an answer that ended,
          // which the client would take as complete and capture would store as a training sample.
          if (c.finish_reason === "abort" || c.finish_reason === "error")
            throw new InferenceError(
              502,
              "internal",
              `the ${this.backend} upstream ended choice ${index} with finish_reason "${c.finish_reason}"`,
            );
          this.finished.add(index);
          out.push({
            type: "finish",
            index,
            finish_reason: c.finish_reason === "length" ? "length" : "stop",
            stop: typeof c.stop_reason === "string" ? c.stop_reason : null,
          });
        }
      }
    if (chunk.usage) {
      const p = chunk.usage.prompt_tokens ?? 0;
      const c = chunk.usage.completion_tokens ?? 0;
      this.usage = { prompt_tokens: p, completion_tokens: c, total_tokens: chunk.usage.total_tokens ?? p + c };
    }
  }

  /** A choice's new text (and its logprobs), joined to the group's last delta where it can be. */
  private delta(
    index: number,
    text: string,
    logprobs: GeneratedTokenLogprobs[] | undefined,
    out: GenerationStreamEvent[],
  ): void {
    this.counted += logprobs?.length || 1;
    // An upstream that ignores max_tokens (and streams on and on): twice what was asked, and then
    // some, is where it stops being read.
    if (this.counted > this.maxPieces)
      throw this.tooMuch(`more than ${this.maxPieces} pieces for ${this.request.max_tokens ?? 16} tokens`);
    const last = out.length > 0 ? out[out.length - 1] : undefined;
    const kept = this.request.logprobs && logprobs ? logprobs : undefined;
    // Our own object, not handed out yet: the run grows in place.
    if (!kept && last?.type === "delta" && !last.logprobs && last.index === index) last.text += text;
    else out.push(kept ? { type: "delta", index, text, logprobs: kept } : { type: "delta", index, text });
  }
}

/**
 * The upstream's server-sent events (or one JSON answer, from a server that does not stream) as
 * generation events, in groups: those of one network read. The group in which the upstream
 * ends its stream (`[DONE]`) carries the last events (finishes, usage) with it.
 */
function readUpstream(
  res: IncomingMessage,
  url: string,
  request: GenerationRequestInput,
  backend: string,
  signal: AbortSignal | undefined,
): GenerationEvents {
  const parser = new UpstreamEventParser(request, backend);
  return Object.assign(batchedEvents(readGroups(res, url, parser, backend, signal)), { used: () => parser.used() });
}

async function* readGroups(
  res: IncomingMessage,
  url: string,
  parser: UpstreamEventParser,
  backend: string,
  signal: AbortSignal | undefined,
): AsyncIterable<GenerationStreamEvent[]> {
  let ended = false;
  try {
    res.setEncoding("utf8");
    if (!String(res.headers["content-type"] ?? "").includes("text/event-stream")) {
      let text = "";
      for await (const chunk of res) {
        text += chunk as string;
        if (text.length > MAX_ANSWER_CHARS)
          throw parser.tooMuch(`a JSON answer longer than ${MAX_ANSWER_CHARS} characters`);
      }
      const events = parser.whole(text);
      ended = true;
      yield [...events, ...parser.end()];
    } else {
      // Once the upstream has sent [DONE] its answer is complete: the caller gets the end at
      // once (the client's last chunk and the end of its response go out in one write), and what
      // is left of the body (usually nothing but its last chunk) is read in the background below,
      // so the connection goes back to the pool for the next request.
      for await (const chunk of res.iterator({ destroyOnReturn: false })) {
        const events = parser.push(chunk as string);
        if (parser.sawDone) {
          ended = true;
          events.push(...parser.end());
        }
        if (events.length > 0) yield events;
        if (ended) return;
      }
      // A body that ended without [DONE]: complete if every choice finished (else end() throws).
      yield parser.end();
    }
  } catch (e) {
    if (signal?.aborted)
      throw signal.reason instanceof Error ? signal.reason : new DOMException("aborted", "AbortError");
    brokeOff(url);
    if (e instanceof InferenceError) throw e;
    throw new InferenceError(502, "internal", `the ${backend} upstream broke off the stream: ${(e as Error).message}`);
  } finally {
    if (ended || res.complete) {
      // Read to its end, which frees the connection; a failure there (a reset, the idle
      // timeout) only closes it.
      res.on("error", () => {});
      res.resume();
    } else res.destroy(); // abandoned or failed mid-answer
  }
}
