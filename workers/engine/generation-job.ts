// A request in flight: its plan, its n sequences, its event channel and its prefill progress.
import type { GenerationStreamEvent, GenerationUsage } from "@/lib/contracts/generation";
import type { EventChannel } from "./event-channel";
import type { PrefillState } from "./model/layouts/layout";
import type { RequestPlan } from "./request-plan";
import type { Sequence } from "./sequence";

export interface GenerationJob {
  plan: RequestPlan;
  /** Whose request it is (the team): the scheduler shares the batch fairly between tenants. */
  tenant: string;
  /** Arrival order, for first come first served within a tenant and between equals. */
  order: number;
  sequences: Sequence[];
  channel: EventChannel<GenerationStreamEvent>;
  /** Prompt tokens already run through the model (chunked prefill). */
  prefilled: number;
  prefillKv: PrefillState | null;
  /**
   * Leading columns of prefillKv that a prefill from the first token computes bit for bit: all of
   * them unless the prefill began from a kept answer (Scheduler.reusePrefix). Unset: all.
   */
  exactColumns?: number;
  /**
   * The prompt's whole cache, which its sequences joined the batch with: held weakly, for keeping
   * an answer's identity check only. Held strongly, every running (or still delivering) job kept
   * its prompt's cache alive twice (once in the batch's rows), outside the KV budget, and the
   * prompt cache's evictions freed nothing while it lived.
   */
  promptState?: WeakRef<PrefillState>;
  cancelled: boolean;
  done: boolean;
}

/** A cancelled generation's error; `usage`: what it had used by then (a job that had started). */
export function abortError(usage?: GenerationUsage): Error & { usage?: GenerationUsage } {
  const e: Error & { usage?: GenerationUsage } = new Error("generation cancelled");
  e.name = "AbortError";
  if (usage) e.usage = usage;
  return e;
}
