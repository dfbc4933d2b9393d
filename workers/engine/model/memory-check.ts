// Whether a model fits in the memory left before it is loaded. A graph that does not fit would
// not fail cleanly: the kernel's OOM killer ends the whole worker, and with it every team's
// deployments on it. Refused here, the deployment fails with its reason instead (and the
// worker's supervisor retries a minute later, when memory may have been freed).
import { readFileSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { loadError } from "../errors";

/**
 * What loading a graph of `weightBytes` takes beyond them: onnxruntime's own copy work, its
 * arenas, the tokenizer, and a first batch's caches. Measured on the 134M bench model: fp32
 * (537 MB of weights) added 580 MiB to the worker, q4 (168 MB) 128 MiB.
 */
const OVERHEAD_BYTES = 256 * 2 ** 20;
const WEIGHT_FACTOR = 1.1;

/** The bytes a graph and its external data files take on disk. */
export function graphBytes(dir: string, files: readonly string[]): number {
  return files.reduce((sum, f) => sum + statSync(path.join(dir, f)).size, 0);
}

/** What loading a graph of `weightBytes` is expected to add to the process. */
export const neededBytes = (weightBytes: number) => Math.ceil(weightBytes * WEIGHT_FACTOR) + OVERHEAD_BYTES;

/**
 * The weights of the models this process has loaded, and of those it has released. Released
 * memory mostly stays in the process's heap (glibc keeps it) where the next model reuses it, but
 * the system does not count it as available: it is added back below, as far as the resident
 * size shows it is still there.
 */
const weights = { loaded: 0, released: 0 };

export function noteLoaded(bytes: number): void {
  weights.loaded += bytes;
  weights.released = Math.max(0, weights.released - bytes);
}

export function noteReleased(bytes: number): void {
  weights.loaded = Math.max(0, weights.loaded - bytes);
  weights.released += bytes;
}

/**
 * The memory this process can still take: the system's MemAvailable (free memory plus what the
 * kernel can reclaim, the page cache among it), and within a container the room left under its
 * cgroup's limit, whichever is less (os.freemem() where /proc says nothing); plus the heap that
 * released models left, at most what the resident size holds beyond the loaded models.
 */
export function availableMemoryBytes(): number {
  let available = memAvailable() ?? os.freemem();
  const cgroup = cgroupRoom();
  if (cgroup !== undefined) available = Math.min(available, cgroup);
  return available + reusableHeap();
}

function reusableHeap(): number {
  return weights.released === 0 ? 0 : reusable(weights.released, weights.loaded, process.memoryUsage.rss());
}

/**
 * Of `released` bytes of weights, what the process still holds: no more than its resident size
 * beyond what its loaded models take (less once glibc has given memory back).
 */
export function reusable(released: number, loaded: number, rss: number): number {
  return Math.max(0, Math.min(released, rss - neededBytes(loaded)));
}

/** The weights loaded and released so far (tests). */
export const trackedWeights = () => ({ ...weights });

function memAvailable(): number | undefined {
  try {
    const m = readFileSync("/proc/meminfo", "utf8").match(/^MemAvailable:\s+(\d+) kB/m);
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** cgroup v2 (memory.max − memory.current), else v1; undefined without a limit. */
function cgroupRoom(): number | undefined {
  const read = (file: string) => {
    try {
      return readFileSync(file, "utf8").trim();
    } catch {
      return undefined;
    }
  };
  const pairs: [string, string][] = [
    ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"],
    ["/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"],
  ];
  for (const [limitFile, usageFile] of pairs) {
    const limit = read(limitFile);
    const usage = read(usageFile);
    if (limit === undefined || usage === undefined) continue;
    const max = Number(limit);
    // "max" (v2) or a huge number (v1: no limit set).
    if (!Number.isFinite(max) || max >= 2 ** 60) return undefined;
    return Math.max(0, max - Number(usage));
  }
  return undefined;
}

export const MiB = (bytes: number) => `${Math.round(bytes / 2 ** 20).toLocaleString("en-US")} MiB`;

/**
 * Throws `insufficient_memory` when a graph of `weightBytes` would not fit in `available` bytes.
 * The message says what it needs and what there is.
 */
/**
 * Refuses a graph whose load would take more than `available`: `inMemory` times its weights
 * (onnxruntime's CPU kernels compute float16 graphs in float32, holding their weights widened:
 * the 268 MB fp16 bench graph added 552 MiB, more than the fp32 one's 449 MiB), plus the overhead.
 */
export function checkMemory(id: string, graph: string, weightBytes: number, available: number, inMemory = 1): void {
  const need = neededBytes(weightBytes * inMemory);
  if (need <= available) return;
  throw loadError(
    "insufficient_memory",
    `model ${id} (${graph}, ${MiB(weightBytes)} of weights) needs about ${MiB(need)} of memory to load; ` +
      `this worker has ${MiB(available)} available. Choose a smaller dtype (q4, q8), free memory, ` +
      `or run the worker on a larger machine.`,
  );
}
