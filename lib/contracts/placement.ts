// Which deployed models a worker loads (WORKER_SERVES). By default every worker loads every model
// of the deployments table; on a fleet of machines with different memory, an operator places
// models instead: `WORKER_SERVES=Qwen/*,meta-llama/*@q4` on one machine, `*@fp32` on a larger
// one. A worker publishes the models it leaves out as `excluded`, so a deployment that no live
// worker is set to serve says so (its state's message, a 503 naming WORKER_SERVES) instead of
// waiting for a worker that will never load it.
import { DTYPE_CHOICES, type DtypeChoice } from "./models";

export interface Placement {
  /** The model id or path, `*` matching any run of characters (slashes included). */
  model: RegExp;
  /** The deployment's dtype choice (`auto`, `q4`…), when the entry names one after `@`. */
  dtype: DtypeChoice | null;
  /** The entry as written, for messages. */
  text: string;
}

/**
 * Parses WORKER_SERVES: comma-separated `GLOB` or `GLOB@DTYPE` entries. Throws an Error naming
 * the entry that is not one (an empty glob, an unknown dtype).
 */
export function parsePlacements(value: string | undefined): Placement[] {
  const entries = (value ?? "")
    .split(",")
    .map((e) => e.trim())
    .filter(Boolean);
  return entries.map((text) => {
    const at = text.lastIndexOf("@");
    const glob = at >= 0 ? text.slice(0, at) : text;
    const dtype = at >= 0 ? text.slice(at + 1) : null;
    if (!glob) throw new Error(`entry "${text}" names no model (write * for every model)`);
    if (dtype !== null && !(DTYPE_CHOICES as readonly string[]).includes(dtype))
      throw new Error(`entry "${text}": the dtype after @ must be one of ${DTYPE_CHOICES.join(", ")}`);
    const pattern = glob
      .split("*")
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
      .join(".*");
    return { model: new RegExp(`^${pattern}$`), dtype: dtype as DtypeChoice | null, text };
  });
}

/** Whether a worker with these placements loads `served` (no placements: every model). */
export function places(placements: readonly Placement[], served: { model: string; dtype: string }): boolean {
  return (
    placements.length === 0 ||
    placements.some((p) => p.model.test(served.model) && (p.dtype === null || p.dtype === served.dtype))
  );
}
