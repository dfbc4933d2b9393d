// A request in flight: its plan, its n sequences, its event channel and its prefill progress.
import type { GenerationStreamEvent } from "@/lib/contracts/generation";
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
  /** The prompt's whole cache, which its sequences joined the batch with (read only). */
  promptState?: PrefillState;
  cancelled: boolean;
  done: boolean;
}

export function abortError(): Error {
  const e = new Error("generation cancelled");
  e.name = "AbortError";
  return e;
}
