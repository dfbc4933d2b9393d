import path from "node:path";
import { repoRoot } from "./build";

/**
 * How the web app process is started, the same for `npm start`, the integration tests and the
 * benchmarks: the production server (scripts/lib/app-server.mjs: `next start`'s work, with the
 * routes written against Node's request and response served by their handler directly) on
 * `port`, with a larger young generation. Every request allocates short-lived objects (Next's
 * request and response streams, the JSON body, the driver's rows); with V8's default 16 MB
 * semi-space the app ran a scavenge every few hundred requests, and 32 MB took about a tenth off
 * its CPU time per `add` (`npm run bench -- ingest`), for at most ~50 MB more memory.
 */
export function appProcessArgs(port: number): string[] {
  return [
    "--max-semi-space-size=32",
    "--require",
    path.join(repoRoot, "scripts/lib/exit-with-parent.cjs"),
    path.join(repoRoot, "scripts/lib/app-server.mjs"),
    "-p",
    String(port),
  ];
}
