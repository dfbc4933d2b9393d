// The engine's public face: validate and plan a request, hand it to the model's scheduler,
// and expose the result as a stream of events, a stream of text deltas, or a whole result.
// The non-streamed result is assembled from the very same events, so for the same seed the
// concatenated deltas equal the returned text.
import type {
  GenerationChoice,
  GenerationRequestInput,
  GenerationResult,
  GenerationStreamEvent,
  GenerationUsage,
} from "@/lib/contracts/generation";
import { EngineError, loadError } from "./errors";
import type { LoadedModel, LoadModelOptions } from "./model/load-model";
import { availableMemoryBytes } from "./model/memory-check";
import { isDtypeChoice, type DtypeChoice } from "./model/dtypes";
import type { ModelRegistry } from "./model/registry";
import { planRequest } from "./request-plan";
import type { Scheduler, SchedulerOptions } from "./scheduler";

export interface EngineOptions extends SchedulerOptions {
  /** Model ids (local folders or hub ids) this engine serves; the first is the default. */
  models: string[];
  registry?: ModelRegistry;
  /**
   * How to load a model in a dtype (progress reporting, cancellation, hub settings). The dtype
   * comes with each request (a deployment's), default `auto`; each (model, dtype) is loaded once.
   */
  loadOptions?: (id: string, dtype: DtypeChoice) => LoadModelOptions;
  /** The memory left to the process (default: what the machine and its cgroup have free). */
  availableMemory?: () => number;
}

export interface GenerateOptions {
  signal?: AbortSignal;
}

/** Scheduler stats that only grow while it lives (Engine.counts keeps them past its unloading). */
const COUNTS = ["promptCacheHits", "promptCachePrefixTokens", "promptCacheAnswers"] as const;
export class Engine {
  private registry: ModelRegistry | undefined;
  private readonly schedulers = new Map<string, Promise<Scheduler>>();
  /** Schedulers no longer wanted (retain), unloaded once their requests have finished. */
  private readonly retiring = new Map<string, Promise<Scheduler>>();
  /** The counts of the schedulers unloaded so far, so that the worker's totals never go down. */
  private readonly closedCounts: Record<(typeof COUNTS)[number], number> = {
    promptCacheHits: 0,
    promptCachePrefixTokens: 0,
    promptCacheAnswers: 0,
  };
  /** Cancels each scheduler's model load while it is in progress (a download). */
  private readonly loads = new Map<Promise<Scheduler>, AbortController>();
  /** The schedulers whose loads have finished, by their promise. */
  private readonly settled = new WeakMap<Promise<Scheduler>, Scheduler>();
  /** The schedulers made and not yet closed (retiring ones included). */
  private readonly made = new Set<Scheduler>();

  private served: string[];

  constructor(private readonly opts: EngineOptions) {
    this.served = [...opts.models];
    this.registry = opts.registry;
  }

  /** Model ids this engine serves; the first is the default. */
  get models(): readonly string[] {
    return this.served;
  }

  /**
   * Replaces the served models (the worker follows the deployments table). A model that is no
   * longer served takes no new requests; requests already running on it finish.
   */
  setModels(ids: string[]): void {
    this.served = [...new Set(ids)];
  }

  /**
   * Keeps only these (model, dtype) pairs loaded; the worker calls it as it follows the
   * deployments table. A pair that is no longer wanted takes no new requests once its running
   * ones have finished: then its session is released and its cache memory freed (a download in
   * progress stops at once; its partial file is kept for next time). Wanted again before that, it
   * stays as it is.
   */
  retain(
    keep: { model: string; dtype: DtypeChoice }[],
    onUnloaded?: (model: string, dtype: DtypeChoice) => void,
  ): void {
    const wanted = new Set(keep.map((k) => schedulerKey(k.model, k.dtype)));
    for (const [key, s] of this.schedulers) {
      if (wanted.has(key)) continue;
      this.schedulers.delete(key);
      this.retiring.set(key, s);
      this.loads.get(s)?.abort(loadError("cancelled", "the model is no longer deployed"));
      void this.unloadWhenIdle(key, s).then((unloaded) => {
        if (unloaded) onUnloaded?.(...keyParts(key));
      });
    }
  }

  /** True once the model is unloaded; false when it was wanted again, or never loaded. */
  private async unloadWhenIdle(key: string, s: Promise<Scheduler>): Promise<boolean> {
    const scheduler = await s.catch(() => null);
    for (;;) {
      if (this.retiring.get(key) !== s) return false; // wanted again
      if (!scheduler) {
        this.retiring.delete(key);
        return false;
      }
      await scheduler.whenIdle();
      if (this.retiring.get(key) !== s) return false;
      // A request that had the scheduler in hand before it retired: wait for it too.
      if (scheduler.busy) continue;
      const closed = scheduler.stats();
      for (const k of COUNTS) this.closedCounts[k] += Number(closed[k] ?? 0);
      scheduler.close();
      this.made.delete(scheduler);
      this.retiring.delete(key);
      await this.registry?.release(...keyParts(key));
      return true;
    }
  }

  /** Loads a model now (otherwise the first request loads it). */
  async load(
    id = this.served[0],
    dtype?: DtypeChoice,
    onProgress?: LoadModelOptions["onProgress"],
  ): Promise<LoadedModel> {
    return (await this.scheduler(id, dtype, onProgress)).model;
  }

  /** `dtype`: the request's (a deployment's); without one, loadOptions' choice, else auto. */
  async scheduler(
    id = this.served[0],
    dtype?: DtypeChoice,
    onProgress?: LoadModelOptions["onProgress"],
  ): Promise<Scheduler> {
    if (id === undefined) throw new EngineError("model_not_found", "this worker serves no model yet", "model");
    if (!this.served.includes(id))
      throw new EngineError("model_not_found", `model ${id} is not served by this worker`, "model");
    // One scheduler per (model, dtype): two deployments of one model in two dtypes run side by side.
    const base = this.opts.loadOptions?.(id, dtype ?? "auto");
    const chosen = dtype ?? base?.dtype ?? "auto";
    const key = schedulerKey(id, chosen);
    const retired = this.retiring.get(key);
    // A retired load that was cancelled mid-download fails: start it again instead.
    if (retired && this.loads.get(retired)?.signal.aborted) this.retiring.delete(key);
    let s = this.schedulers.get(key) ?? this.retiring.get(key);
    if (s) {
      this.retiring.delete(key);
      this.schedulers.set(key, s);
    } else {
      const load = new AbortController();
      const signal = base?.signal ? AbortSignal.any([base.signal, load.signal]) : load.signal;
      const created = this.createScheduler(id, {
        ...base,
        dtype: chosen,
        signal,
        ...(onProgress ? { onProgress } : {}),
      });
      s = created;
      this.loads.set(created, load);
      this.schedulers.set(key, created);
      created.then(
        (scheduler) => {
          this.loads.delete(created);
          this.settled.set(created, scheduler);
        },
        () => {
          this.loads.delete(created);
          if (this.schedulers.get(key) === created) this.schedulers.delete(key);
        },
      );
    }
    return s;
  }

  // transformers.js and onnxruntime (about 150 MB resident) are loaded with the first model, not
  // with the engine: a worker that serves no model yet (one that only packages datasets) stays small.
  private async createScheduler(id: string, opts: LoadModelOptions | undefined): Promise<Scheduler> {
    const [{ ModelRegistry }, { Scheduler }] = await Promise.all([import("./model/registry"), import("./scheduler")]);
    this.registry ??= new ModelRegistry();
    // What the models loaded before may still take (their budgets and prompt caches, less what
    // they hold) is not free for this one's weights either: checked against the memory left.
    const unclaimed = () => [...this.made].reduce((sum, other) => sum + other.unclaimedBytes(), 0);
    const free = opts?.availableMemory ?? this.opts.availableMemory ?? availableMemoryBytes;
    const model = await this.registry.get(id, {
      ...opts,
      availableMemory: opts?.availableMemory === null ? null : () => free() - unclaimed(),
    });
    if (opts?.signal?.aborted) {
      // Cancelled while onnxruntime built its session (which cannot be stopped): not served. A
      // scheduler made now would never be closed (a new load took its place) and its budget
      // would be set aside from every later model's.
      await this.registry.releaseCancelled(id, opts.dtype ?? "auto");
      throw loadError("cancelled", "the model is no longer deployed");
    }
    // Without a configured budget, half the memory left once the model is in: room for this
    // model's requests to grow their caches without the worker being OOM-killed, and for others.
    // What the models loaded before may still take (their budgets and prompt caches, less what
    // they hold) is not left: otherwise each model's budget counted the others' unused room, and
    // together they could come to more than the machine has.
    const left = (this.opts.availableMemory ?? availableMemoryBytes)() - unclaimed();
    const kvBudgetBytes = this.opts.kvBudgetBytes ?? Math.max(256 * 2 ** 20, left / 2);
    const scheduler = new Scheduler(model, { ...this.opts, kvBudgetBytes });
    this.made.add(scheduler);
    return scheduler;
  }

  /** The prompt caches' counts since the worker started: of the models loaded now, and of those unloaded. */
  async counts(): Promise<Record<(typeof COUNTS)[number], number>> {
    const out = { ...this.closedCounts };
    for (const s of await this.loadStats()) for (const k of COUNTS) out[k] += Number(s[k] ?? 0);
    return out;
  }

  /**
   * Load figures of every model loaded (never loads one), for the worker's /health and metrics:
   * those being unloaded too while their last requests run (`retiring: 1`).
   */
  async loadStats(): Promise<Record<string, number | string>[]> {
    const out: Record<string, number | string>[] = [];
    for (const [map, retiring] of [
      [this.schedulers, 0],
      [this.retiring, 1],
    ] as const) {
      for (const [key, s] of map) {
        // Loads in progress are left out, not waited for: a download can take many minutes, and
        // the worker's metrics (the app's scrape gives each worker 2 s) must answer meanwhile.
        const scheduler = this.settled.get(s);
        if (!scheduler) continue;
        const [id, dtype] = keyParts(key);
        out.push({ id, dtype, ...scheduler.stats(), ...(retiring ? { retiring } : {}) });
      }
    }
    return out;
  }

  /** Unloads every model this engine loaded. */
  async dispose(): Promise<void> {
    await this.registry?.dispose();
  }

  /**
   * Validates (context length included) and enqueues; rejects before any model work when the
   * request is invalid or the queue is full. The returned iterable yields the events.
   */
  async start(
    input: GenerationRequestInput | unknown,
    opts: GenerateOptions = {},
  ): Promise<AsyncIterable<GenerationStreamEvent>> {
    const { model: modelId, dtype } = (input ?? {}) as { model?: unknown; dtype?: unknown };
    const scheduler = await this.scheduler(
      typeof modelId === "string" ? modelId : undefined,
      isDtypeChoice(dtype) ? dtype : undefined,
    );
    const plan = planRequest(scheduler.model, input);
    const channel = scheduler.submit(plan, opts.signal);
    if (plan.request.echo && plan.request.n >= 1) {
      return prependEcho(channel, plan.promptText, plan.request.n);
    }
    return channel;
  }

  async generate(input: GenerationRequestInput | unknown, opts: GenerateOptions = {}): Promise<GenerationResult> {
    const modelId = (input as { model?: unknown } | null)?.model;
    const events = await this.start(input, opts);
    return collectResult(events, typeof modelId === "string" ? modelId : (this.served[0] ?? ""));
  }

  /** Text deltas of the first choice (n = 1 use): concatenated, they equal generate()'s text. */
  async *streamText(input: GenerationRequestInput | unknown, opts: GenerateOptions = {}): AsyncIterable<string> {
    for await (const e of await this.start(input, opts))
      if (e.type === "delta" && e.index === 0 && e.text) yield e.text;
  }
}

/** A generation's events assembled into its whole result (what generate() returns). */
export async function collectResult(
  events: AsyncIterable<GenerationStreamEvent>,
  model: string,
): Promise<GenerationResult> {
  const choices = new Map<number, GenerationChoice>();
  let usage: GenerationUsage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
  const choice = (index: number) => {
    let c = choices.get(index);
    if (!c) choices.set(index, (c = { index, text: "", finish_reason: "length", stop: null, logprobs: null }));
    return c;
  };
  for await (const e of events) {
    if (e.type === "delta") {
      const c = choice(e.index);
      c.text += e.text;
      if (e.logprobs) c.logprobs = [...(c.logprobs ?? []), ...e.logprobs];
    } else if (e.type === "finish") Object.assign(choice(e.index), { finish_reason: e.finish_reason, stop: e.stop });
    else if (e.type === "done") usage = e.usage;
  }
  return {
    model,
    choices: [...choices.values()].sort((a, b) => a.index - b.index),
    usage,
  };
}

async function* prependEcho(
  events: AsyncIterable<GenerationStreamEvent>,
  prompt: string,
  n: number,
): AsyncIterable<GenerationStreamEvent> {
  const it = events[Symbol.asyncIterator]();
  let finished = false;
  try {
    for (let index = 0; index < n; index++) yield { type: "delta", index, text: prompt };
    for (let r = await it.next(); !r.done; r = await it.next()) yield r.value;
    finished = true;
  } finally {
    if (!finished) await it.return?.(); // consumer stopped early: cancel the generation
  }
}

const schedulerKey = (id: string, dtype: DtypeChoice) => `${id}\u0000${dtype}`;
const keyParts = (key: string) => key.split("\u0000") as [id: string, dtype: DtypeChoice];
