// A request in flight: its plan, its n sequences, its event channel and its prefill progress.
import type { GenerationStreamEvent } from "@/lib/contracts/generation";
import type { EventChannel } from "./event-channel";
import type { PrefillCache } from "./kv-cache";
import type { RequestPlan } from "./request-plan";
import type { Sequence } from "./sequence";

export interface GenerationJob {
  plan: RequestPlan;
  sequences: Sequence[];
  channel: EventChannel<GenerationStreamEvent>;
  /** Prompt tokens already run through the model (chunked prefill). */
  prefilled: number;
  prefillKv: PrefillCache | null;
  cancelled: boolean;
  done: boolean;
}

export function abortError(): Error {
  const e = new Error("generation cancelled");
  e.name = "AbortError";
  return e;
}
