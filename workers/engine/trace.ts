// ENGINE_TRACE=<file>: the scheduler appends one JSON line per forward pass ({k: "prefill" or
// "decode", at: Date.now() at its end, ms, rows, reshapeMs: cache reshaping before it, moved:
// cache bytes copied; a decode step adds passMs, expsMs and drawMs: its pass(es), the sampling
// exps run and the draws}) and one per request's first token ({k: "first", at, tenant, n, queuedMs,
// ttftMs: from submit}), to see where the time goes (`npm run bench -- fairness --trace`
// summarizes it). Off unless set; lines are buffered and written when the engine idles.
import { appendFileSync } from "node:fs";

const file = process.env.ENGINE_TRACE;
let lines: string[] = [];

export const tracing = Boolean(file);

export function trace(record: Record<string, unknown>) {
  if (!file) return;
  lines.push(JSON.stringify(record));
  if (lines.length >= 1024) flushTrace();
}

export function flushTrace() {
  if (!file || lines.length === 0) return;
  appendFileSync(file, lines.join("\n") + "\n");
  lines = [];
}

if (file) process.on("exit", flushTrace);
