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

/**
 * How the worker process is started, the same for `npm start`, the integration tests and the
 * benchmarks: workers/main.ts under tsx's ESM loader only (`tsx/esm`), which compiles our
 * TypeScript (ESM, like every file of the worker). Not `--import tsx`: that also hooks
 * `require`, and both of tsx's hooks process the files of the packages they load. Loading
 * transformers.js (a 1.3 MB bundle) then cost about 160 MB of resident memory, against about
 * 35 MB with the ESM loader alone and the package's CommonJS build (workers/engine/
 * transformers.ts requires it, which that loader leaves to Node). Counting a million samples'
 * tokens in the datasets bench's worker peaked at 492 MB before, 343–360 MB after.
 *
 * `--heap-growing-percent=50`: after a full collection V8 lets the old space grow to 1.5 times
 * what survived before the next one, not up to 4 times as its own heuristic allows when
 * collections are cheap. Token counting promotes about 7 MB/s of short-lived objects (the
 * tokenizer's and the chat template's); with ~33 MB live the heap swung up to 150 MB between
 * collections, and most of the worker's peak was that garbage. This is when to collect, not a
 * limit: a 16 MB sample still parses. Measured: the 300k-sample token phase 341 → 266 MB; sixty
 * 16 MB samples parsed in a row, 390 → 275 MB for 7–10% more time.
 */
export const WORKER_NODE_FLAGS = ["--heap-growing-percent=50", "--import", "tsx/esm"];

export function workerProcessArgs(nodeArgs: string[] = []): string[] {
  return [...nodeArgs, ...WORKER_NODE_FLAGS, path.join(repoRoot, "workers/main.ts")];
}
