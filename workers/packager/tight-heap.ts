import { setFlagsFromString } from "node:v8";
import { collectGarbage } from "@/lib/gc";

/**
 * How far V8 lets the old space grow past what survived a full collection, while held: 50%.
 * Unheld, V8 picks the factor itself (`--heap-growing-percent=0`, its default): up to 4 times
 * when collections are cheap, as they are for a worker's small heap.
 */
const TIGHT_PERCENT = 50;

let holds = 0;

/**
 * Keeps the worker's heap tight while a job leaves much garbage in V8's old space, until the
 * returned function is called (again: a no-op). Counting tokens does: the tokenizer and the chat
 * template promote about 7 MB/s of short-lived objects, and with V8's own factor the old space
 * filled to about four times what survived a collection before the next one (the datasets bench's
 * token phase at a million samples: 343–360 MB; 266–275 MB held). So does parsing samples of
 * megabytes (sixty 16 MB samples parsed in a row, held from the first: 376–377 MB; 249–264 MB).
 *
 * It is held for such jobs only, not for the whole worker: set for the whole process, it made
 * packaging without token counts run about 30 full collections per million samples instead of
 * 0–8 (its ~20 MB heap is collected at ~30 MB), and the Parquet file about 15% slower.
 *
 * The first hold runs a full collection, so that the tight limit applies at once (V8 sets the next
 * limit at each full collection: without it the old space could still grow to the last, loose
 * one). The last release gives V8 its own factor back from its next full collection. This says
 * when V8 collects, not how much the heap may hold: a 16 MB sample still parses.
 */
export function holdTightHeap(): () => void {
  if (holds++ === 0) {
    setFlagsFromString(`--heap-growing-percent=${TIGHT_PERCENT}`);
    collectGarbage();
  }
  let held = true;
  return () => {
    if (!held) return;
    held = false;
    if (--holds === 0) setFlagsFromString("--heap-growing-percent=0");
  };
}

/** How many holds are taken now (tests). */
export function tightHeapHolds(): number {
  return holds;
}
