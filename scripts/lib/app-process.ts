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
 * No heap flag: V8 sizes the heap's growth itself, except while a job counts tokens or parses
 * large samples (workers/packager/tight-heap.ts).
 */
export const WORKER_NODE_FLAGS = ["--import", "tsx/esm"];

export function workerProcessArgs(nodeArgs: string[] = []): string[] {
  return [...nodeArgs, ...WORKER_NODE_FLAGS, path.join(repoRoot, "workers/main.ts")];
}
