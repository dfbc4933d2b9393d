// The web app's production server: `next start`'s job (the production build, every page and
// route through Next.js), with one short cut. The routes written against the plain Node request
// and response (lib/http/node-deployment-route.ts, lib/http/node-api-route.ts: the deployment
// endpoints, the pipelines' add, add-batch and import, and OpenAI's two completion paths) are
// handed straight to their Pages Router API route's handler, the one Next.js itself would run
// after routing the request there by its rewrite in next.config.mjs. Next's routing (its router,
// the rewrite matching, the Pages Router's API runtime) cost more CPU per request than what these
// routes do for one: in front of a fast upstream server (`npm run bench -- upstream --tokens 32`),
// 0.57 against 1.28 ms of app CPU per completion, and the time to first token through the app 0.9
// against 1.8–2.4 ms above the upstream's own; for an `add` (`npm run bench -- ingest`), 0.15
// against 0.62–0.69 ms.
//
// Each handler is the same module instance Next.js runs (its build's route entry, found through
// the build's pages manifest), so caches, metrics and limits are shared; it gets the request as
// Next.js would pass it (`req.url` rewritten to the route's path, `req.query` its path segments).
// The response headers that next.config.mjs gives the path are set from the build's routes
// manifest; the routes gzip their own large JSON answers as Next.js's `compress` would
// (lib/http/node-response.ts). A route that the build does not map exactly so (its rewrite
// changed, a header rule depends on the request) goes through Next.js as before, and the first
// line printed says so.
//
// Started as `node app-server.mjs -p PORT` (scripts/lib/app-process.ts). SIGTERM or SIGINT: stop
// taking connections, let the requests in flight finish (streams included), close Next.js, exit
// 143 or 130, as `next start` does (lib/observe/stop-drain.ts holds that exit for its writes).
import { randomBytes } from "node:crypto";
import http from "node:http";
import { createRequire } from "node:module";
import path from "node:path";

// As `next start` sets it (React and Next pick their production builds by it when loaded).
process.env.NODE_ENV ||= "production";

const require = createRequire(import.meta.url);
const root = path.resolve(import.meta.dirname, "../..");
const distDir = path.join(root, process.env.NEXT_DIST_DIR || ".next");

const portArg = process.argv.indexOf("-p");
const port = Number(portArg >= 0 ? process.argv[portArg + 1] : process.env.PORT || 3000);

/** The routes served directly: their handlers use nothing of Next's request or response. */
const DIRECT_PAGES = [
  "/api/deployments/[team]/[name]",
  "/api/v1/pipelines/[id]/add",
  "/api/v1/pipelines/[id]/add-batch",
  "/api/v1/pipelines/[id]/import",
  "/api/v1/chat/completions",
  "/api/v1/completions",
];

/**
 * @typedef {{ page: string, pattern: RegExp, names: string[], destination: string,
 *   handler: (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>,
 *   headers: [string, string][] }} Shortcut
 */

/** A rewrite's `:name` segments, or null when it has anything else (a regex, a modifier). */
function simpleSegments(route) {
  const segments = route.split("/").slice(1);
  if (segments.some((s) => s.startsWith(":") && !/^:\w+$/.test(s))) return null;
  if (segments.some((s) => !s.startsWith(":") && /[:()*+?]/.test(s))) return null;
  return segments;
}

/** The short cut to `page`, or why there is none. */
async function shortcut(page, routes, pages) {
  const entry = pages[page];
  if (!entry) return { page, reason: "not in the build's pages manifest" };
  const destination = page.replace(/\[(\w+)\]/g, ":$1");
  const rewrite = (routes.rewrites?.beforeFiles ?? []).find((r) => r.destination === destination);
  if (!rewrite || rewrite.has || rewrite.missing) return { page, reason: "no plain rewrite to it" };
  const from = simpleSegments(rewrite.source);
  const to = simpleSegments(destination);
  const params = (segments) =>
    segments
      .filter((s) => s.startsWith(":"))
      .map((s) => s.slice(1))
      .sort()
      .join();
  if (!from || !to || params(from) !== params(to))
    return { page, reason: `its rewrite (${rewrite.source}) is not plain` };
  const names = from.filter((s) => s.startsWith(":")).map((s) => s.slice(1));
  const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const pattern = new RegExp(
    "^/" + from.map((s) => (s.startsWith(":") ? "([^/?#]+)" : escape(s))).join("/") + "(?:\\?|$)",
  );
  const sample = "/" + from.map((s) => (s.startsWith(":") ? "x" : s)).join("/");
  const matching = (list) => (list ?? []).filter((r) => new RegExp(r.regex).test(sample));
  if (matching(routes.redirects).length > 0) return { page, reason: "a redirect applies to its path" };
  if (matching(routes.rewrites?.beforeFiles).length !== 1) return { page, reason: "other rewrites apply to its path" };
  const rules = matching(routes.headers);
  if (rules.some((h) => h.has || h.missing)) return { page, reason: "a header rule for it depends on the request" };
  // A Turbopack entry is an async module: its exports come with a promise.
  const route = await require(path.join(distDir, "server", entry));
  if (typeof route?.default !== "function") return { page, reason: "its entry exports no handler" };
  const headers = rules.flatMap((h) => h.headers.map((x) => [x.key, x.value]));
  return { page, pattern, names, destination, handler: route.default, headers };
}

async function shortcuts() {
  const routes = require(path.join(distDir, "routes-manifest.json"));
  const pages = require(path.join(distDir, "server/pages-manifest.json"));
  return Promise.all(
    DIRECT_PAGES.map((page) =>
      shortcut(page, routes, pages).catch((err) => ({ page, reason: String(err?.message ?? err) })),
    ),
  );
}

const next = require("next");
const app = next({ dev: false, dir: root, hostname: "localhost", port });
const handle = app.getRequestHandler();
await app.prepare();
const found = await shortcuts();
/** @type {Shortcut[]} */
const direct = found.filter((s) => "handler" in s);
const routed = found.filter((s) => !("handler" in s));
const list = (items) => items.map((s) => ("reason" in s ? `${s.page} (${s.reason})` : s.page)).join(", ");
console.log(
  `Served directly: ${list(direct) || "none"}${routed.length > 0 ? `; routed by Next.js: ${list(routed)}` : ""}`,
);

/** The short cut for `url` and the request as Next.js would pass it on, or null. */
function route(url) {
  for (const s of direct) {
    const m = s.pattern.exec(url);
    if (!m) continue;
    try {
      const query = Object.fromEntries(s.names.map((name, i) => [name, decodeURIComponent(m[i + 1])]));
      const search = url.slice(m[0].length - (m[0].endsWith("?") ? 1 : 0));
      return {
        shortcut: s,
        query,
        url: s.destination.replace(/:(\w+)/g, (_, n) => m[s.names.indexOf(n) + 1]) + search,
      };
    } catch {
      return null; // a malformed escape: Next.js answers it
    }
  }
  return null;
}

/**
 * The client's address, written over any client-sent value into the header the per-address
 * limits read (lib/http/client-address.ts, which names it): the connection's address, or, when
 * that is a proxy on a loopback or private address, the X-Forwarded-For entry TRUST_PROXY_HOPS
 * (default 1) from the right, which the proxy appended (the entries left of it are the client's
 * to write). TRUST_PROXY_HOPS=0: the connection's address always.
 */
const CLIENT_ADDRESS_HEADER = "x-lmp-client-address";
const proxyHops = Math.max(0, Math.floor(Number(process.env.TRUST_PROXY_HOPS ?? 1)) || 0);
const PRIVATE = /^(127\.|10\.|192\.168\.|172\.(1[6-9]|2\d|3[01])\.|::1$|f[cd][0-9a-f]{2}:)/i;
function clientAddress(req) {
  const peer = (req.socket.remoteAddress ?? "").replace(/^::ffff:/, "");
  const forwarded = req.headers["x-forwarded-for"];
  if (proxyHops === 0 || !forwarded || !PRIVATE.test(peer)) return peer;
  const entries = String(forwarded)
    .split(",")
    .map((e) => e.trim())
    .filter(Boolean);
  return entries[Math.max(0, entries.length - proxyHops)] ?? peer;
}

// Whether a proxy forwarded the request (it says so in one of these headers), told to the routes
// before Next.js adds x-forwarded-* headers of its own to every request: /metrics answers this
// machine only, and a proxy on it connects from loopback for every client it serves.
// A client could send the header itself: "not proxied" is said with a secret of this process
// (in its environment, where the routes read it), so a value from outside never matches.
const PROXIED_HEADER = "x-lmp-proxied";
const FORWARDING = ["x-forwarded-for", "forwarded", "x-real-ip", "x-forwarded-host"];
process.env.LMP_PROXIED_NONCE = randomBytes(16).toString("hex");
const NOT_PROXIED = `0:${process.env.LMP_PROXIED_NONCE}`;

const server = http.createServer((req, res) => {
  req.headers[PROXIED_HEADER] = FORWARDING.some((h) => req.headers[h] !== undefined) ? "1" : NOT_PROXIED;
  req.headers[CLIENT_ADDRESS_HEADER] = clientAddress(req);
  if (malformedApiPath(req.url ?? "")) return void refuseMalformedPath(req, res);
  const found = route(req.url ?? "");
  if (!found) return void handle(req, res);
  req.url = found.url;
  req.query = found.query;
  for (const [key, value] of found.shortcut.headers) res.setHeader(key, value);
  found.shortcut.handler(req, res).catch((err) => {
    // The routes answer their own errors; this would be a bug in one.
    console.error(`${found.shortcut.page} failed`, err);
    if (res.headersSent) res.destroy();
    else {
      res.writeHead(500, { "content-type": "application/json; charset=utf-8" });
      res.end(JSON.stringify({ error: { type: "internal", message: "Internal error." } }));
    }
  });
});

// Node's default `requestTimeout` (5 minutes) covers a request's whole body, even while it keeps
// arriving: an import of a few hundred MB on an ordinary uplink was cut with a 408 and nothing
// kept. An hour takes the 1 GiB import limit at 2.4 Mbit/s, and still ends a body that never
// does; the head must still come within `headersTimeout` (60 s).
server.requestTimeout = 60 * 60_000;

/**
 * An API path (`/v1/…`, a deployment's, the dashboard's `/api/…`) with a percent-escape that does
 * not decode (`/v1/pipelines/%E0%A4%A`): Next.js answered it with its HTML 400 page, without the
 * error body, the request id or CORS that every other answer of these routes has.
 */
function malformedApiPath(url) {
  const pathname = url.split("?")[0];
  if (!/^\/(v1|deployments|api)\//.test(pathname)) return false;
  try {
    decodeURIComponent(pathname);
    return false;
  } catch {
    return true;
  }
}

function refuseMalformedPath(req, res) {
  const requestId = `req_${randomBytes(16).toString("hex")}`;
  res.writeHead(400, {
    "content-type": "application/json; charset=utf-8",
    "x-request-id": requestId,
    "access-control-allow-origin": "*",
    "access-control-expose-headers": "x-request-id",
  });
  res.end(
    JSON.stringify({
      error: {
        type: "invalid_request",
        message: `The URL's path has a malformed percent-escape (request id ${requestId}).`,
        param: "path",
      },
    }),
  );
  req.resume();
}

let stopping = false;
const stop = (signal) => {
  if (stopping) return;
  stopping = true;
  // Kept-alive connections left idle by the answers still running are closed as those end,
  // rather than after their keep-alive timeout.
  const idle = setInterval(() => server.closeIdleConnections(), 100);
  server.close(() => {
    clearInterval(idle);
    void app
      .close()
      .catch((err) => console.error(err))
      .finally(() => process.exit(signal === "SIGINT" ? 130 : 143));
  });
};
process.on("SIGTERM", () => stop("SIGTERM"));
process.on("SIGINT", () => stop("SIGINT"));
// A closed terminal: the launcher's children get it too; they drain as on SIGTERM, not die at once.
process.on("SIGHUP", () => stop("SIGTERM"));

server.once("error", (err) => {
  // One line, not a stack trace: the launcher checks the port first, `next start` users may not.
  console.error(err.code === "EADDRINUSE" ? `Port ${port} is in use: set PORT to another port.` : String(err));
  process.exit(1);
});
server.listen(port, () => console.log(`Ready on http://localhost:${port}`));
