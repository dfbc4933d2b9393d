// The web app's production server: `next start`'s job (the production build, every page and
// route through Next.js), with one short cut. The deployment endpoints (/deployments/{team}/{name})
// go straight to their Pages Router API route's handler, the one Next.js itself would run after
// routing there by the rewrite in next.config.mjs. Next's routing (its router, the rewrite
// matching, the Pages Router's API runtime) cost about 0.9 ms of CPU per completion, more than
// everything else the app does for one in front of a fast upstream server: with the short cut,
// `npm run bench -- upstream --tokens 32` measured 0.70 against 1.59 ms of app CPU per completion,
// and the time to first token through the app 1.3 against 2.9 ms above the upstream's own.
//
// The handler is the same module instance Next.js runs (its build's route entry, found through
// the build's pages manifest), so caches, metrics and limits are shared. The response headers that
// next.config.mjs gives every path are set from the build's routes manifest. When the build does
// not map the endpoint exactly so (the rewrite or the route changed), or a header rule depends on
// the request, every request goes through Next.js as before, and the first line printed says why.
//
// Started as `node app-server.mjs -p PORT` (scripts/lib/app-process.ts). SIGTERM or SIGINT: stop
// taking connections, let the requests in flight finish (streams included), close Next.js, exit
// 143 or 130, as `next start` does (lib/observe/stop-drain.ts holds that exit for its writes).
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

/** The public path of the endpoint, its route file's page, and the rewrite between them. */
const ENDPOINT = {
  source: "/deployments/:team/:name",
  destination: "/api/deployments/:team/:name",
  page: "/api/deployments/[team]/[name]",
  path: /^\/deployments\/([^/?#]+)\/([^/?#]+)(?:\?|$)/,
};

/**
 * The endpoint's handler and the headers Next.js would add to its answers, or why the build does
 * not allow the short cut.
 * @returns {Promise<{ handler: (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>, headers: [string, string][] } | { reason: string }>}
 */
async function shortCut() {
  const routes = require(path.join(distDir, "routes-manifest.json"));
  const rewrites = Array.isArray(routes.rewrites) ? routes.rewrites : (routes.rewrites?.beforeFiles ?? []);
  const mapped = rewrites.some(
    (r) => r.source === ENDPOINT.source && r.destination === ENDPOINT.destination && !r.has && !r.missing,
  );
  if (!mapped) return { reason: `no rewrite of ${ENDPOINT.source} to ${ENDPOINT.destination} in the build` };
  const sample = "/deployments/team/name";
  const rules = (routes.headers ?? []).filter((h) => new RegExp(h.regex).test(sample));
  if (rules.some((h) => h.has || h.missing))
    return { reason: "a header rule of next.config.mjs depends on the request" };
  const entry = require(path.join(distDir, "server/pages-manifest.json"))[ENDPOINT.page];
  if (!entry) return { reason: `no ${ENDPOINT.page} in the build's pages manifest` };
  // A Turbopack entry is an async module: its exports come with a promise.
  const route = await require(path.join(distDir, "server", entry));
  if (typeof route?.default !== "function") return { reason: `${entry} exports no handler` };
  return { handler: route.default, headers: rules.flatMap((h) => h.headers.map((x) => [x.key, x.value])) };
}

const next = require("next");
const app = next({ dev: false, dir: root, hostname: "localhost", port });
const handle = app.getRequestHandler();
await app.prepare();
const cut = await shortCut().catch((err) => ({ reason: String(err?.message ?? err) }));
console.log(
  "handler" in cut
    ? "Deployment endpoints: served by their route directly"
    : `Deployment endpoints: routed by Next.js (${cut.reason})`,
);

/** The endpoint's dynamic segments, as Next.js would give them in `req.query`; null when not one. */
function endpointParams(url) {
  const m = ENDPOINT.path.exec(url);
  if (!m) return null;
  try {
    return { team: decodeURIComponent(m[1]), name: decodeURIComponent(m[2]) };
  } catch {
    return null; // a malformed escape: Next.js answers it
  }
}

const server = http.createServer((req, res) => {
  const params = "handler" in cut ? endpointParams(req.url ?? "") : null;
  if (!params) return void handle(req, res);
  req.query = params;
  for (const [key, value] of cut.headers) res.setHeader(key, value);
  cut.handler(req, res).catch((err) => {
    // The route answers its own errors; this would be a bug in it.
    console.error("deployment endpoint failed", err);
    if (res.headersSent) res.destroy();
    else {
      res.writeHead(500, { "content-type": "application/json; charset=utf-8" });
      res.end(JSON.stringify({ error: { type: "internal", message: "Internal error." } }));
    }
  });
});

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

server.listen(port, () => console.log(`Ready on http://localhost:${port}`));
