// Continuous batching for one model. Each loop iteration runs one forward pass: either a
// prefill chunk of the request being admitted, or one decode step for every running sequence.
// When both have work they alternate, so a long prompt delays running streams by at most one
// chunk per token. A request's sequences join the running batch after its prompt pass and
// leave as soon as they finish or are cancelled (their KV rows are dropped at that point).
// Rows keep their slots in the batch: a joiner goes last, and a leaving row's slot is taken by
// the last row (keptSlots), so the layouts that store rows in place (padded, gqa) copy
// only the joiner's prompt cache and at most one row per leaver, never the whole cache.
//
// Fair sharing between tenants (teams): each has its own queue, and the next request admitted is
// the oldest of the tenant with the fewest sequences running. Each tenant may run up to maxBatch
// sequences, and the batch holds up to twice that in all: so one team's flood of n=16 requests
// cannot hold another team's first token back by more than a step and a prefill, and that other
// team's few sequences do not hold the flood's next request back either (with one tenant, the
// batch is maxBatch as before). A request read during a pass is admitted before the next one
// (the loop yields two event-loop turns), a tenant with nothing running parks another tenant's
// chunked prefill (see admit), and its row joining and leaving moves no other row's cache: on
// `npm run bench -- fairness --quick` the flood keeps 92-95% of its throughput and the newcomer's
// first token takes 2.2-2.5× its idle time; full runs on a loaded 2-core machine: 66-92% and
// 3.0-4.4× (before: 58% and 5.6×, 29% and 11×). See docs/api.md, Fair sharing.
// ENGINE_TRACE=<file> traces each pass (./trace.ts).
import type { GenerationStreamEvent, GenerationUsage } from "@/lib/contracts/generation";
import { logger } from "@/lib/observe/log";
import { guardFor } from "./bad-words";
import { EngineError } from "./errors";
import { EventChannel } from "./event-channel";
import { abortError, type GenerationJob } from "./generation-job";
import { KV_SHRINK_AFTER_MS } from "./model/layouts/kv-rows";
import type { DecodeBatch, PrefillState } from "./model/layouts/layout";
import { stateBytesPerRow } from "./model/layouts/state-rows";
import type { LoadedModel } from "./model/load-model";
import { createPrng, randomSeed } from "./prng";
import type { RequestPlan } from "./request-plan";
import { drawFromExps, drawsFromExps, ranksFromExps, sampleToken } from "./sampler";
import { SamplingExps, type RowExps } from "./sampling-exps";
import { Sequence } from "./sequence";
import { tokenTable } from "./token-table";
import { flushTrace, trace, tracing } from "./trace";

export interface SchedulerOptions {
  /** Most sequences decoding together. */
  maxBatch?: number;
  /** Most requests of one tenant waiting for admission; past it, its submit fails with `overloaded`. */
  maxQueue?: number;
  /**
   * Prompt tokens per prefill forward pass. A hybrid model whose export does not carry its
   * recurrent states from one chunk to the next (ModelInfo.chunkedPrefill, probed at load) takes
   * a prompt in one pass whatever this says, as transformers.js' generate() does.
   */
  prefillChunk?: number;
  /**
   * How long an empty batch keeps its KV buffers for the next rows (default KV_SHRINK_AFTER_MS):
   * requests that follow one another reuse them instead of faulting in new memory each time.
   */
  kvReleaseMs?: number;
  /**
   * The most KV cache the batch may come to hold: a request is admitted only if the batch, with
   * it, fits when every row reaches its prompt + max_tokens (rows are padded to the longest);
   * otherwise it waits for rows to finish. A request that alone would not fit is refused.
   * Default: no limit (the engine sets one from the memory left, see Engine).
   */
  kvBudgetBytes?: number;
  /**
   * Whether draws at a temperature take the vocabulary's exponentials from onnxruntime
   * (./sampling-exps.ts; default true). false: the sampler computes them itself, as before.
   */
  samplingExps?: boolean;
  /**
   * Bytes of finished prompts' caches (and their first logits) kept per team for requests whose
   * prompt is one of them (default 64 MiB; 0: none), or begins like one: such a request skips its
   * prefill, or the whole chunks they share. Over the limit, the team that holds the most drops
   * its least recently used.
   */
  promptCacheBytes?: number;
  /**
   * Whether the prompt cache also keeps a chat request's finished answers (default true): its
   * prompt and the tokens it generated, so that the conversation's next turn, which begins with
   * them, prefills only the new message. Those columns were computed one token at a time, which
   * is not bit for bit what a prefill of the same tokens computes: false keeps every answer
   * identical to an engine without the cache.
   */
  promptCacheAnswers?: boolean;
  /**
   * Whether the prompt cache may also fill the KV budget's idle room (default false): beyond
   * promptCacheBytes, it may hold what the batch's cache, planned at every row's prompt +
   * max_tokens, leaves of kvBudgetBytes. An admitted request that needs that room takes it back
   * (the team that holds the most drops its least recently used first). So the worker's cache
   * memory stays within promptCacheBytes + kvBudgetBytes, and what the batch does not use keeps
   * prompts and conversations.
   */
  promptCacheIdleKv?: boolean;
}

/** A finished prompt's prefill (or a finished chat answer's cache), kept for the next requests. */
interface CachedPrompt {
  /** The cache of ids, or of the ids after base's where there is a base. */
  state: PrefillState;
  /**
   * An answer's: its prompt's kept entry, whose cache is the first columns of the answer's (the
   * very one its rows started from), so that the answer keeps only its own columns. Dropping the
   * base drops the answer.
   */
  base?: CachedPrompt;
  /** The logits after the last token (empty for an answer: only its beginning is ever reused). */
  logits: Float32Array;
  bytes: number;
  tenant: string;
  ids: readonly number[];
  /** Leading columns that a prefill of ids from the first token computes bit for bit. */
  exact: number;
}

/** A kept entry's cache, in parts: its base's, then its own. */
const partsOf = (p: CachedPrompt): PrefillState[] => (p.base ? [p.base.state, p.state] : [p.state]);

interface Row {
  seq: Sequence;
  job: GenerationJob;
  /** Join order: rows are sampled (and their events emitted) in it, whatever their slot. */
  joined: number;
}

export class Scheduler {
  private readonly maxBatch: number;
  private readonly maxQueue: number;
  private readonly prefillChunk: number;
  /** Waiting requests, per tenant, oldest first. */
  private readonly queues = new Map<string, GenerationJob[]>();
  private queued = 0;
  private arrivals = 0;
  private prefilling: GenerationJob | null = null;
  private rows: Row[] = [];
  private joiners: { row: Row; state: PrefillState }[] = [];
  private joins = 0;
  /** ENGINE_TRACE only: when each job was submitted and admitted (performance.now()). */
  private readonly times = new WeakMap<GenerationJob, { submitted: number; admitted: number }>();
  /** The running rows' caches, in `rows` order; how they are stored is the model layout's. */
  private batch: DecodeBatch | null = null;
  private readonly kvReleaseMs: number;
  /** Drops the empty batch's buffers once it has stayed empty for kvReleaseMs. */
  private releaseTimer: NodeJS.Timeout | null = null;
  private looping = false;
  private preferPrefill = true;
  /** The last pass was a newcomer's prefill run out of turn (before a decode step that was due). */
  private newcomerWent = false;
  /** When each tenant's last request was admitted (a count of admissions): turns between equals. */
  private readonly lastAdmitted = new Map<string, number>();
  private admissions = 0;
  private idleWaiters: (() => void)[] = [];
  private readonly kvBudgetBytes: number;
  /** Cache bytes one token of one row takes (every layer's key and value). */
  private readonly kvBytesPerToken: number;
  /** Recurrent state bytes one row holds, whatever its length (hybrid models). */
  private readonly stateBytesPerRow: number;
  private useExps: boolean;
  /** The exps session, created by the first draw that takes it. */
  private exps: Promise<SamplingExps> | null = null;
  /** Finished prompts by tenant and token ids (promptKey), least recently used first. */
  private readonly prompts = new Map<string, CachedPrompt>();
  private promptBytes = 0;
  private readonly promptCacheBytes: number;
  private readonly promptCacheAnswers: boolean;
  private readonly promptCacheIdleKv: boolean;
  /** Chat answers kept (promptCacheAnswers). */
  private answersKept = 0;
  /** Requests whose prefill the prompt cache answered. */
  private promptHits = 0;
  /** Requests whose prefill began from a kept prompt's beginning, and the tokens it spared. */
  private prefixHits = 0;
  private prefixTokens = 0;

  constructor(
    readonly model: LoadedModel,
    opts: SchedulerOptions = {},
  ) {
    this.maxBatch = opts.maxBatch ?? 16;
    this.maxQueue = opts.maxQueue ?? 64;
    this.prefillChunk = model.info.chunkedPrefill ? (opts.prefillChunk ?? 128) : Infinity;
    this.kvReleaseMs = opts.kvReleaseMs ?? KV_SHRINK_AFTER_MS;
    this.kvBudgetBytes = opts.kvBudgetBytes ?? Infinity;
    this.useExps = opts.samplingExps ?? true;
    this.promptCacheBytes = opts.promptCacheBytes ?? 64 * 2 ** 20;
    this.promptCacheAnswers = opts.promptCacheAnswers ?? true;
    this.promptCacheIdleKv = (opts.promptCacheIdleKv ?? false) && Number.isFinite(this.kvBudgetBytes);
    const { kv } = model.info.graph;
    this.kvBytesPerToken = kv.entries.length * kv.heads * kv.headDim * (kv.type === "float16" ? 2 : 4);
    this.stateBytesPerRow = stateBytesPerRow(model.info.graph.states);
  }

  /** The cache a batch of `rows` rows takes when its longest reaches `span` tokens. */
  private kvBytes(rows: number, span: number): number {
    return rows * (span * this.kvBytesPerToken + this.stateBytesPerRow);
  }

  /** Current load, for tests, metrics and the worker's registry. */
  stats() {
    return {
      running: this.rows.length,
      queued: this.queued,
      prefilling: this.prefilling ? 1 : 0,
      kvColumns: this.batch?.columns ?? 0,
      /** Held by the batch's caches: its rows', and room an emptied batch keeps for kvReleaseMs. */
      kvBytes: this.batch?.bytes ?? 0,
      kvAllocations: this.batch?.allocations ?? 0,
      /** Requests whose prefill the prompt cache answered, and the bytes it holds. */
      promptCacheHits: this.promptHits,
      promptCacheBytes: this.promptBytes,
      /** Requests whose prefill began from a kept prompt's beginning, and the tokens not prefilled. */
      promptCachePrefixHits: this.prefixHits,
      promptCachePrefixTokens: this.prefixTokens,
      /** Finished chat answers whose caches were kept for their conversation's next turn. */
      promptCacheAnswers: this.answersKept,
      /** The bytes the prompt cache may hold now: promptCacheBytes and the KV budget's idle room. */
      promptCacheRoom: this.promptCacheBytes > 0 ? this.promptRoom() : 0,
    };
  }

  /** The KV cache budget its batch is admitted within (Infinity: none). */
  get kvBudget(): number {
    return this.kvBudgetBytes;
  }

  /**
   * The memory this scheduler may still come to take: its KV budget and its prompt cache, less
   * what they hold now (0 without a budget). A model loaded later leaves it aside.
   */
  unclaimedBytes(): number {
    if (!Number.isFinite(this.kvBudgetBytes)) return 0;
    return Math.max(0, this.kvBudgetBytes + this.promptCacheBytes - (this.batch?.bytes ?? 0) - this.promptBytes);
  }

  /** Whether anything is running or waiting. */
  get busy(): boolean {
    return this.looping || this.queued > 0;
  }

  /**
   * No more requests (the model is being unloaded): submit refuses them, and the kept cache
   * buffers go now. Only when not busy.
   */
  close(): void {
    this.closed = true;
    void this.exps?.then((e) => e.dispose()).catch(() => undefined);
    this.exps = null;
    this.prompts.clear();
    this.promptBytes = 0;
    if (this.releaseTimer) clearTimeout(this.releaseTimer);
    this.releaseTimer = null;
    this.batch = null;
  }

  private closed = false;

  /** Resolves when the loop has nothing left to do (all rows gone, caches dropped). */
  whenIdle(): Promise<void> {
    if (!this.looping) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  submit(plan: RequestPlan, signal?: AbortSignal): EventChannel<GenerationStreamEvent> {
    if (this.closed) throw new EngineError("model_not_found", `model ${this.model.id} is no longer served`, "model");
    const n = plan.request.n;
    if (n > this.maxBatch)
      throw new EngineError("invalid_request", `n (${n}) exceeds this worker's batch size (${this.maxBatch})`, "n");
    // Per team: one team's flood fills its own queue, and another team's requests still wait
    // their turn rather than being refused (the batch is shared fairly between the queues).
    const waiting = this.queues.get(plan.request.tenant ?? "")?.length ?? 0;
    if (waiting >= this.maxQueue) {
      throw new EngineError(
        "overloaded",
        `engine overloaded: ${waiting} of this team's requests already queued for this model (limit ${this.maxQueue}); retry later`,
      );
    }
    if (signal?.aborted) throw abortError();
    const alone = this.kvBytes(n, spanOf(plan));
    if (alone > this.kvBudgetBytes) {
      const mib = (b: number) => `${Math.ceil(b / 2 ** 20)} MiB`;
      throw new EngineError(
        "invalid_request",
        `this request's KV cache would take ${mib(alone)} (${n} × ${spanOf(plan)} tokens: prompt + max_tokens), ` +
          `more than this worker's KV cache budget of ${mib(this.kvBudgetBytes)}; lower max_tokens or n`,
        "max_tokens",
      );
    }
    const job = this.createJob(plan);
    signal?.addEventListener("abort", () => this.cancel(job), { once: true });
    const queue = this.queues.get(job.tenant);
    if (queue) queue.push(job);
    else this.queues.set(job.tenant, [job]);
    this.queued++;
    if (tracing) this.times.set(job, { submitted: performance.now(), admitted: 0 });
    this.kick();
    return job.channel;
  }

  private createJob(plan: RequestPlan): GenerationJob {
    const m = this.model;
    const table = tokenTable(m.tokenizer, 0);
    const badWords = guardFor(table, plan.request.bad_words);
    const seed = plan.seed ?? randomSeed();
    const job: GenerationJob = {
      plan,
      tenant: plan.request.tenant ?? "",
      order: this.arrivals++,
      sequences: [],
      channel: new EventChannel<GenerationStreamEvent>(() => this.cancel(job)),
      prefilled: 0,
      prefillKv: null,
      cancelled: false,
      done: false,
    };
    // The tokens' own text: never the "clean-up" many exports ask for (" ," → ","), which would
    // make the text differ from the bytes bad_words checks and the deltas stop being prefixes.
    const decode = (ids: number[]) =>
      ids.length === 0
        ? ""
        : m.tokenizer.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false });
    for (let i = 0; i < plan.request.n; i++) {
      job.sequences.push(
        new Sequence(i, plan.promptIds, createPrng(seed, i), {
          decode,
          table,
          eosTokenIds: m.info.eosTokenIds,
          badWords,
          stops: plan.request.stop,
          maxTokens: plan.request.max_tokens,
          wantLogprobs: plan.request.logprobs !== undefined,
          emit: (e) => job.channel.push(e),
        }),
      );
    }
    return job;
  }

  private cancel(job: GenerationJob) {
    if (job.done || job.cancelled) return;
    job.cancelled = true;
    // What it used: its prompt once its prefill began (a prefill parked back in its queue
    // included) or the prompt cache answered it, and the tokens its sequences drew. The worker
    // keeps it for the app to charge.
    const usage = usageOf(job, job.prefilled > 0 || !this.queues.get(job.tenant)?.includes(job));
    this.dequeue(job);
    if (this.prefilling === job) {
      this.prefilling = null;
      job.prefillKv = null;
    }
    for (const s of job.sequences) s.finish("cancelled", null);
    job.done = true;
    job.channel.end(abortError(usage));
    // Its rows leave the batch (and free their KV) at the next step.
  }

  private kick() {
    if (this.looping) return;
    this.looping = true;
    this.loop().catch((e: unknown) => {
      logger().error({ err: e }, "the scheduler's loop failed");
      this.failAll(e);
    });
  }

  private async loop() {
    try {
      for (;;) {
        let ranPrefill = false;
        let goesFirst = false;
        let admitting = true;
        // Everything of a step is in here: before, a throw from admit() or reshape() (a buffer that
        // could not be allocated) rejected the loop, and Node ended the worker with every stream.
        try {
          this.admit();
          this.reshape();
          admitting = false;
          const canPrefill = this.prefilling !== null;
          const canDecode = this.rows.length > 0;
          if (!canPrefill && !canDecode) break;
          // A tenant with nothing running goes first: its first token waits for no decode step. Once:
          // the pass after one that went first is a decode step (before, a team whose requests all end
          // with their prefill, max_tokens 1, never had a row and stopped every other team's streams).
          const newcomer =
            canPrefill && !this.newcomerWent && !this.rows.some((r) => r.job.tenant === this.prefilling!.tenant);
          goesFirst = canPrefill && canDecode && !this.preferPrefill && newcomer;
          // A prompt the cache answers runs no pass: the next one may go at once.
          if (canPrefill && (!canDecode || this.preferPrefill || goesFirst))
            ranPrefill = await this.prefillAlone(this.prefilling!);
          else ranPrefill = await this.decodeStep();
          if (tracing) this.traceStep();
        } catch (e) {
          this.failAll(e);
          // What admitting met may meet the queued requests again: they end too, rather than the
          // loop meeting it at every turn for as long as they wait.
          if (admitting) this.failQueued(e);
        }
        // Prefill chunks and decode steps alternate while both wait: after a pass with a chunk,
        // decode next; after a decode step, the next prompt goes first, also one that arrives
        // during it (toggling on every pass instead had every other arrival wait a whole extra
        // decode step: 8 q8 streams, 20-24 ms a step).
        this.preferPrefill = !ranPrefill;
        this.newcomerWent = goesFirst && ranPrefill;
        // Let I/O in (new requests, disconnects): two turns of the event loop, so that a request read
        // in the first (its body, then the async steps to submit) is admitted before the next pass.
        await new Promise((r) => setImmediate(r));
        await new Promise((r) => setImmediate(r));
      }
    } finally {
      this.looping = false;
    }
    if (this.queued > 0) this.kick();
    else {
      flushTrace();
      for (const w of this.idleWaiters.splice(0)) w();
    }
  }

  /**
   * Each tenant's fair share of the batch's maxBatch rows, max-min over what it asks for (its
   * sequences running and those of its queued requests): a tenant that asks for less than an even
   * split keeps what it asks, and the rest is split among the others. So a team with one stream
   * leaves the rest of the batch to a team with many, and a team that never holds a row (its
   * requests end with their prefill) does not count against anyone.
   */
  private fairShares(running: ReadonlyMap<string, number>): Map<string, number> {
    const demand = new Map(running);
    for (const [tenant, queue] of this.queues)
      for (const job of queue) demand.set(tenant, (demand.get(tenant) ?? 0) + job.plan.request.n);
    const shares = new Map<string, number>();
    let left = this.maxBatch;
    const ascending = [...demand].sort((a, b) => a[1] - b[1]);
    ascending.forEach(([tenant, wants], i) => {
      const share = Math.min(wants, left / (ascending.length - i));
      shares.set(tenant, share);
      left -= share;
    });
    return shares;
  }

  /**
   * Starts the prefill of the next request: of the tenants with requests waiting, one below its
   * fair share of the batch (fairShares), the one admitted longest ago (then the oldest request);
   * else the one with the fewest sequences in the batch. Its tenant's sequences must fit
   * in maxBatch, and the whole batch in twice that. A long prompt prefilled in chunks does not
   * hold a tenant with nothing running back: its prefill is parked (at the head of its tenant's
   * queue, its cache kept) while the newcomer's runs, so a newcomer waits at most one pass.
   */
  private admit() {
    if (this.queued === 0) return;
    const running = new Map<string, number>();
    let longest = 0; // the longest span among the batch's rows
    for (const r of [...this.rows, ...this.joiners.map((j) => j.row)]) {
      running.set(r.job.tenant, (running.get(r.job.tenant) ?? 0) + 1);
      longest = Math.max(longest, spanOf(r.job.plan));
    }
    if (this.prefilling) {
      const parked = this.prefilling;
      // Only a prefill under way is parked: one admitted in preference to the newcomer (its turn
      // came first) and not begun keeps its place, else a team whose requests never hold a row
      // (a newcomer every time) had every other team's next request parked before it ran.
      if (!parked.prefilled || !running.get(parked.tenant) || !this.newcomerWaiting(running)) return;
      this.prefilling = null;
      const queue = this.queues.get(parked.tenant);
      if (queue) queue.unshift(parked);
      else this.queues.set(parked.tenant, [parked]);
      this.queued++;
    }
    // Tenants below their fair share of the batch take turns: the one admitted longest ago first
    // (then the oldest request). A tenant at its share goes only when no tenant below it waits,
    // fewest sequences first. Before, fewest sequences running always went first: a team whose
    // requests all end with their prefill (max_tokens 1: a classifier) never holds a row, so it
    // won every admission, and another team's queued streams ran one at a time behind it. And
    // before that, the oldest request won, so a team that had queued many requests that each fill
    // the KV budget alone went first every time the batch emptied.
    const turn = (j: GenerationJob) => this.lastAdmitted.get(j.tenant) ?? -1;
    const shares = this.fairShares(running);
    const rank = (j: GenerationJob): number[] => {
      const load = running.get(j.tenant) ?? 0;
      const below = load < (shares.get(j.tenant) ?? 0);
      return [below ? 0 : 1, below ? 0 : load, turn(j), j.order];
    };
    let next: GenerationJob | undefined;
    let best: number[] | undefined;
    for (const queue of this.queues.values()) {
      const head = queue[0];
      if (!head) continue;
      const r = rank(head);
      if (!best || before(r, best)) {
        next = head;
        best = r;
      }
    }
    if (!next) return;
    const n = next.plan.request.n;
    const occupied = this.rows.length + this.joiners.length;
    if ((running.get(next.tenant) ?? 0) + n > this.maxBatch || occupied + n > 2 * this.maxBatch) return;
    // The cache the batch would come to hold with it; past the budget it waits for rows to end
    // (it fits alone: submit checked).
    const planned = this.kvBytes(occupied + n, Math.max(longest, spanOf(next.plan)));
    if (occupied > 0 && planned > this.kvBudgetBytes) return;
    // The prompt cache gives back the idle room it held that the batch now needs; first, what
    // this request starts from is made the most recently used, so that it is not what goes.
    const room = this.promptRoom(planned);
    if (this.promptBytes > room) {
      const from = this.startingEntry(next);
      if (from) this.used(...from);
      this.shrinkPrompts(room);
    }
    this.dequeue(next);
    this.prefilling = next;
    this.lastAdmitted.set(next.tenant, ++this.admissions);
    const times = this.times.get(next);
    if (times) times.admitted = performance.now();
  }

  /** Whether a tenant with no sequences running has a request waiting that the batch has room for. */
  private newcomerWaiting(running: Map<string, number>) {
    const occupied = this.rows.length + this.joiners.length;
    for (const queue of this.queues.values()) {
      const head = queue[0];
      if (head && !running.get(head.tenant) && occupied + head.plan.request.n <= 2 * this.maxBatch) return true;
    }
    return false;
  }

  private dequeue(job: GenerationJob) {
    const queue = this.queues.get(job.tenant);
    const i = queue?.indexOf(job) ?? -1;
    if (i < 0) return;
    queue!.splice(i, 1);
    this.queued--;
    if (queue!.length === 0) this.queues.delete(job.tenant);
  }

  /**
   * Drops finished/cancelled rows and adds joiners; the batch moves caches only then. Surviving
   * rows keep their slots; a slot left empty takes a surviving row from the end of the batch,
   * and joiners go last: a row leaving from the end or joining moves no other row's cache.
   */
  private reshape() {
    const t0 = tracing ? performance.now() : 0;
    const keep = keptSlots(this.rows.map((r) => !r.seq.finished && !r.job.cancelled));
    const joiners = this.joiners.filter((j) => !j.row.seq.finished && !j.row.job.cancelled);
    if (keep.length === this.rows.length && this.joiners.length === 0) return;
    this.keepAnswers();
    this.rows = [...keep.map((i) => this.rows[i]), ...joiners.map((j) => j.row)];
    this.joiners = [];
    if (this.releaseTimer) clearTimeout(this.releaseTimer);
    this.releaseTimer = null;
    if (this.rows.length === 0 && this.kvReleaseMs <= 0) this.batch = null;
    else {
      this.batch ??= this.model.runner.createBatch(() => this.batchLimit());
      // Each joiner's span: the batch keeps no room for its row past it (layouts/kv-rows.ts).
      this.batch.reshape(
        keep,
        joiners.map((j) => ({ ...j.state, span: spanOf(j.row.job.plan) })),
      );
    }
    if (this.rows.length === 0 && this.batch) {
      this.releaseTimer = setTimeout(() => {
        this.releaseTimer = null;
        if (this.rows.length === 0) this.batch = null;
      }, this.kvReleaseMs);
      this.releaseTimer.unref();
    }
    if (tracing) this.reshapeMs += performance.now() - t0;
  }

  private reshapeMs = 0;
  private lastMoved = 0;
  private stepStart = 0;
  /** A decode step's parts, for the trace: its pass(es), the exps run, the draws. */
  private parts = { passMs: 0, expsMs: 0, drawMs: 0 };

  private traceStep() {
    const at = performance.now();
    const moved = this.batch?.moved ?? this.lastMoved;
    trace({
      k: this.lastStep,
      at: Date.now(),
      ms: +(at - this.stepStart).toFixed(2),
      rows: this.rows.length,
      reshapeMs: +this.reshapeMs.toFixed(2),
      moved: moved >= this.lastMoved ? moved - this.lastMoved : moved,
      ...(this.lastStep === "decode" ? this.parts : {}),
    });
    this.reshapeMs = 0;
    this.lastMoved = moved;
  }

  private lastStep: "prefill" | "decode" = "decode";

  /**
   * A prompt's pass that fails (onnxruntime refusing that prompt, memory for its one long pass)
   * ends that request only: the batch's rows and their caches are not touched by it. Before, it
   * failed every stream on the worker, of every team.
   */
  private async prefillAlone(job: GenerationJob): Promise<boolean> {
    try {
      return await this.prefillStep(job);
    } catch (e) {
      this.failJob(job, engineError(e, "the prompt's pass failed"));
      return true;
    }
  }

  /** The next chunk of a job's prompt, or its cached prefill; whether a pass ran. */
  private async prefillStep(job: GenerationJob): Promise<boolean> {
    this.lastStep = "prefill";
    this.stepStart = performance.now();
    const ids = job.plan.promptIds;
    const key = job.prefilled === 0 && this.promptCacheBytes > 0 ? promptKey(job) : null;
    const cached = key !== null ? this.prompts.get(key) : undefined;
    if (cached) {
      this.used(key!, cached);
      this.promptHits++;
      job.prefilled = ids.length;
      await this.finishPrefill(job, cached.state, cached.logits);
      return false;
    }
    if (key !== null) this.reusePrefix(job);
    const start = job.prefilled;
    const end = Math.min(ids.length, start + this.prefillChunk);
    const { state, logits } = await this.model.runner.prefill(job.prefillKv, ids, start, end);
    if (job.cancelled) return true;
    job.prefillKv = state;
    job.prefilled = end;
    if (end < ids.length) return true;
    if (this.promptCacheBytes > 0)
      this.remember(job.tenant, key ?? promptKey(job), state, logits, ids, job.exactColumns ?? ids.length);
    await this.finishPrefill(job, state, logits);
    return true;
  }

  /** A prompt's first tokens drawn; its sequences join the batch at the next reshape. */
  private async finishPrefill(job: GenerationJob, state: PrefillState, logits: Float32Array) {
    const [pre] = await this.expsFor([{ job, logits }]);
    if (job.cancelled) return;
    this.prefilling = null;
    for (const seq of job.sequences) this.sampleInto(seq, job, logits, pre);
    const times = this.times.get(job);
    if (times) {
      const queuedMs = +(times.admitted - times.submitted).toFixed(2);
      const ttftMs = +(performance.now() - times.submitted).toFixed(2);
      trace({ k: "first", at: Date.now(), tenant: job.tenant, n: job.sequences.length, queuedMs, ttftMs });
    }
    for (const seq of job.sequences)
      if (!seq.finished) this.joiners.push({ row: { seq, job, joined: this.joins++ }, state });
    job.promptState = new WeakRef(state);
    job.prefillKv = null;
    this.settle(job);
  }

  /**
   * Starts a job's prefill after the longest beginning its prompt shares with a kept prompt of its
   * team (a system prompt, or the earlier turns of a conversation), short of the prompt's last
   * token (whose logits the prefill computes). Within the kept columns a prefill computes, it is
   * cut at a chunk boundary and exact: a prompt is prefilled in chunks from its first token, so the
   * kept cache's first k chunks came from the very passes this prompt's first k chunks would run
   * (the same tokens on the same past; even a per-tensor quantized graph's scales see only the
   * chunk). A kept chat answer is reused as far as it is shared (the next turn of its
   * conversation): its columns were computed one token at a time, and so differ from a prefill's
   * in their last bits. Not for graphs prefilled in one pass, nor for recurrent states, which are
   * kept for the whole prompt only.
   */
  private reusePrefix(job: GenerationJob) {
    const found = this.prefixOf(job);
    if (!found) return;
    const { best, length } = found;
    this.used(...best);
    const exact = best[1].exact;
    job.prefillKv = this.model.runner.prefix(partsOf(best[1]), length, job.plan.promptIds.length);
    job.prefilled = length;
    if (length > exact) job.exactColumns = exact;
    this.prefixHits++;
    this.prefixTokens += length;
  }

  /** The kept entry whose beginning a job's prompt starts from (see reusePrefix), and how far. */
  private prefixOf(job: GenerationJob): { best: [string, CachedPrompt]; length: number } | null {
    const chunk = this.prefillChunk;
    if (!Number.isFinite(chunk) || this.stateBytesPerRow > 0) return null;
    const ids = job.plan.promptIds;
    let best: [string, CachedPrompt] | undefined;
    let length = 0;
    for (const entry of this.prompts) {
      const p = entry[1];
      const limit = Math.min(p.ids.length, ids.length - 1);
      if (p.tenant !== job.tenant || limit <= length) continue;
      let n = 0;
      while (n < limit && p.ids[n] === ids[n]) n++;
      const usable = n <= p.exact ? n - (n % chunk) : n;
      if (usable > length) [best, length] = [entry, usable];
    }
    return best ? { best, length } : null;
  }

  /** The kept entry a job's prefill will start from: its very prompt, or a beginning of it. */
  private startingEntry(job: GenerationJob): [string, CachedPrompt] | null {
    if (job.prefilled > 0) return null;
    const key = promptKey(job);
    const exact = this.prompts.get(key);
    return exact ? [key, exact] : (this.prefixOf(job)?.best ?? null);
  }

  /** A kept prompt just used: most recently used, so last in the map. */
  private used(key: string, prompt: CachedPrompt) {
    // An answer's base first, so that it is never less recently used than the answer.
    if (prompt.base)
      for (const [k, p] of this.prompts)
        if (p === prompt.base) {
          this.used(k, p);
          break;
        }
    this.prompts.delete(key);
    this.prompts.set(key, prompt);
  }

  /**
   * Keeps a finished prompt's cache and logits (read only from here on: the layouts copy a
   * joiner's cache into their own buffers) within promptCacheBytes, dropping the least recently
   * used of the team that holds the most.
   */
  private remember(
    tenant: string,
    key: string,
    state: PrefillState,
    logits: Float32Array,
    ids: readonly number[],
    exact: number,
    base?: CachedPrompt,
  ): boolean {
    if (this.prompts.has(key)) return false;
    const bytes = this.kvBytes(1, state.length) - this.stateBytesPerRow / 2 + logits.byteLength;
    const room = this.promptRoom();
    if (bytes > room) return false;
    // An answer's base is as recently used as the answer: never the first to go for it.
    for (const [k, p] of base ? this.prompts : [])
      if (p === base) {
        this.used(k, p);
        break;
      }
    this.prompts.set(key, { state, logits: logits.slice(), bytes, tenant, ids, exact, ...(base ? { base } : {}) });
    this.promptBytes += bytes;
    this.shrinkPrompts(room);
    return this.prompts.has(key);
  }

  /**
   * The bytes the prompt cache may hold: promptCacheBytes and, with promptCacheIdleKv, what the
   * batch leaves of the KV budget, measured as the budget is: every row (and the prefill under
   * way) at its prompt + max_tokens, the longest for all, or what its buffers hold if more (their
   * headroom, and the room an emptied batch keeps). `planned`: that, with a request about to join.
   */
  private promptRoom(planned?: number): number {
    if (!this.promptCacheIdleKv) return this.promptCacheBytes;
    let batch = planned;
    if (batch === undefined) {
      const spans = [...this.rows, ...this.joiners.map((j) => j.row)].map((r) => spanOf(r.job.plan));
      const p = this.prefilling;
      if (p) spans.push(...Array.from({ length: p.plan.request.n }, () => spanOf(p.plan)));
      batch = spans.length > 0 ? this.kvBytes(spans.length, Math.max(...spans)) : 0;
    }
    return this.promptCacheBytes + Math.max(0, this.kvBudgetBytes - Math.max(batch, this.batch?.bytes ?? 0));
  }

  /**
   * What the batch's buffers may hold with their headroom (layouts' BatchLimit): the KV budget,
   * less what the prompt cache holds of its idle room. Rows are admitted by their spans within
   * the budget, and their buffers always have room up to those.
   */
  private batchLimit(): number {
    return this.kvBudgetBytes - (this.promptCacheIdleKv ? Math.max(0, this.promptBytes - this.promptCacheBytes) : 0);
  }

  /** Drops kept entries until the cache holds at most `room` bytes. */
  private shrinkPrompts(room: number) {
    if (this.promptBytes <= room) return;
    const held = new Map<string, number>();
    for (const p of this.prompts.values()) held.set(p.tenant, (held.get(p.tenant) ?? 0) + p.bytes);
    while (this.promptBytes > room) {
      // The team holding the most gives way: another team's stream of new prompts cannot push out
      // a team's few kept ones (its system prompt), only the least used of its own.
      const largest = [...held].reduce((a, b) => (b[1] > a[1] ? b : a))[0];
      for (const [k, p] of this.prompts) {
        if (p.tenant !== largest) continue;
        for (const gone of this.forget(k, p)) held.set(largest, held.get(largest)! - gone.bytes);
        break;
      }
    }
  }

  /** Drops a kept entry and the answers whose base it is; returns what went. */
  private forget(key: string, prompt: CachedPrompt): CachedPrompt[] {
    const gone = [prompt];
    this.prompts.delete(key);
    this.promptBytes -= prompt.bytes;
    for (const [k, p] of [...this.prompts]) if (p.base === prompt) gone.push(...this.forget(k, p));
    return gone;
  }

  /**
   * Keeps the caches of the chat answers leaving the batch (promptCacheAnswers): each row's prompt
   * and the tokens it fed, for the conversation's next turn, which begins with them. Called before
   * the rows leave, while their slots still hold them.
   */
  private keepAnswers() {
    const batch = this.batch;
    if (!batch || !this.promptCacheAnswers || this.promptCacheBytes <= 0) return;
    if (!Number.isFinite(this.prefillChunk) || this.stateBytesPerRow > 0) return;
    const room = this.promptRoom();
    this.rows.forEach((r, i) => {
      const { seq, job } = r;
      if (!seq.finished || seq.finished.reason === "cancelled" || job.cancelled || !job.plan.request.messages) return;
      // Its prompt's entry, when it is still the very cache the row started from: then only the
      // answer's own columns are copied (with a long system prompt, most of the row is the prompt).
      const prompt = this.prompts.get(promptKey(job));
      const base = prompt && prompt.state === job.promptState?.deref() ? prompt : undefined;
      if (this.kvBytes(1, seq.tokens.length - (base?.state.length ?? 0)) > room) return;
      const state = batch.extract(i, base ? base.state.length : 0);
      if (!state) return;
      const ids = seq.tokens.slice(0, (base?.state.length ?? 0) + state.length);
      const exact = Math.min(job.exactColumns ?? Infinity, job.plan.promptIds.length);
      if (this.remember(job.tenant, answerKey(job.tenant, ids), state, NO_LOGITS, ids, exact, base)) this.answersKept++;
    });
  }

  /** One decode step for every running row; whether a prefill chunk ran between its passes. */
  private async decodeStep(): Promise<boolean> {
    this.lastStep = "decode";
    this.stepStart = performance.now();
    const rows = this.rows;
    // A step of several passes (exact-length: one per row length) lets one prefill chunk in
    // between them, so a request arriving mid-step need not wait for all of them; then the next
    // iteration decodes (one chunk per step, as when they alternate).
    let prefilled = false;
    const between = async () => {
      if (prefilled) return;
      this.admit();
      if (!this.prefilling) return;
      prefilled = true;
      // prefillStep marks itself in the trace fields; this is still the decode step's pass.
      const stepStart = this.stepStart;
      await this.prefillAlone(this.prefilling);
      this.lastStep = "decode";
      this.stepStart = stepStart;
    };
    const logits = await this.batch!.step(
      rows.map((r) => r.seq.pendingToken),
      between,
    );
    const passed = performance.now();
    const touched = new Set<GenerationJob>();
    // In join order (slots are not), so each request's events come in the order they always did.
    const order = rows.map((_, i) => i).sort((a, b) => rows[a].joined - rows[b].joined);
    const pre = await this.expsFor(
      rows.map((r, i) => ({ job: r.job, logits: logits[i], done: r.seq.finished !== null })),
    );
    const computed = performance.now();
    for (const i of order) {
      const r = rows[i];
      if (r.job.cancelled || r.seq.finished) continue;
      this.sampleInto(r.seq, r.job, logits[i], pre[i]);
      touched.add(r.job);
    }
    const r2 = (x: number) => Math.round(x * 100) / 100;
    if (tracing)
      this.parts = {
        passMs: r2(passed - this.stepStart),
        expsMs: r2(computed - passed),
        drawMs: r2(performance.now() - computed),
      };
    for (const job of touched) this.settle(job);
    return prefilled;
  }

  /**
   * The exps of the rows whose draws take them (drawsFromExps), in one run of the exps session;
   * undefined for the others.
   */
  private async expsFor(
    rows: { job: GenerationJob; logits: Float32Array; done?: boolean }[],
  ): Promise<(RowExps | undefined)[]> {
    const out: (RowExps | undefined)[] = rows.map(() => undefined);
    if (!this.useExps || rows.length === 0) return out;
    const V = rows[0].logits.length;
    const taking = rows.flatMap((r, i) =>
      !r.done && !r.job.cancelled && !r.job.done && drawsFromExps(r.job.plan.sampling, V) ? [i] : [],
    );
    if (taking.length === 0) return out;
    try {
      this.exps ??= SamplingExps.create();
      const exps = await (
        await this.exps
      ).compute(
        taking.map((i) => rows[i].logits),
        taking.map((i) => rows[i].job.plan.sampling.temperature),
        taking.some((i) => ranksFromExps(rows[i].job.plan.sampling)),
      );
      taking.forEach((i, k) => (out[i] = exps[k]));
    } catch (err) {
      // The sampler computes them itself from now on: slower, the same draws' distribution.
      this.useExps = false;
      logger().warn({ err }, "sampling exps session failed; the sampler computes the exps itself");
    }
    return out;
  }

  private sampleInto(seq: Sequence, job: GenerationJob, logits: Float32Array, pre?: RowExps) {
    if (job.cancelled) return; // failed by another of its sequences, this step
    const ctx = {
      prng: seq.prng,
      seen: seq.seen,
      banned: seq.bannedNext(),
      fallbackToken: this.model.info.eosTokenIds[0] ?? 0,
    };
    const p = job.plan.sampling;
    const drawn = (pre && drawFromExps(logits, pre, p, ctx)) ?? sampleToken(logits, p, ctx);
    // No logit to draw from falls back to the end of sequence: right when the request banned every
    // token, wrong when the graph's output was not a number (an fp16 overflow), which ended the
    // answer silently as a "stop". That request fails instead, with the reason; the others go on.
    if (drawn.id === ctx.fallbackToken && notANumber(logits))
      return this.failJob(
        job,
        new EngineError(
          "internal",
          `the model's output was not a number at token ${seq.generated + 1} (its ${this.model.info.dtype} graph ` +
            "overflowed): try another dtype of the model",
        ),
      );
    seq.accept(drawn);
  }

  /** Ends one job with `error` (and what it used), as cancel ends it: its rows leave at the next step. */
  private failJob(job: GenerationJob, error: EngineError) {
    if (job.done || job.cancelled) return;
    job.cancelled = true;
    const usage = usageOf(job, true);
    this.dequeue(job);
    if (this.prefilling === job) {
      this.prefilling = null;
      job.prefillKv = null;
    }
    for (const s of job.sequences) if (!s.finished) s.finish("cancelled", null);
    job.done = true;
    logger().error({ tenant: job.tenant, err: error.message }, "generation failed");
    job.channel.end(Object.assign(error, { usage }));
  }

  /** Ends a job's stream once all its sequences are finished. */
  private settle(job: GenerationJob) {
    if (job.done || !job.sequences.every((s) => s.finished)) return;
    job.done = true;
    job.channel.push({ type: "done", usage: usageOf(job, true) });
    job.channel.end();
  }

  /** Ends every queued request with `e` (they had used nothing). */
  private failQueued(e: unknown) {
    const error = engineError(e, "scheduling failed");
    for (const queue of this.queues.values())
      for (const job of queue.splice(0)) {
        job.done = true;
        job.channel.end(
          Object.assign(new EngineError(error.code, error.message, error.param, error.reason), {
            usage: usageOf(job, false),
          }),
        );
      }
    this.queued = 0;
  }

  private failAll(e: unknown) {
    const error = engineError(e, "forward pass failed");
    const jobs = new Set<GenerationJob>([...this.rows.map((r) => r.job), ...this.joiners.map((j) => j.row.job)]);
    if (this.prefilling) jobs.add(this.prefilling);
    for (const job of jobs) {
      job.done = true;
      // Each with what it had used (its prompt, once prefilled, and the tokens drawn): the app
      // charges it as it charges a cancelled one (before, a generation that failed after streaming
      // tokens counted none).
      const used = usageOf(job, job.prefilled > 0 || this.prefilling !== job);
      job.channel.end(
        Object.assign(new EngineError(error.code, error.message, error.param, error.reason), { usage: used }),
      );
    }
    this.rows = [];
    this.joiners = [];
    this.batch = null;
    this.prefilling = null;
  }
}

/**
 * The old slots the new batch takes, in new-slot order, given which of the current rows survive:
 * a survivor keeps its slot when that slot still exists; the slots of rows that left are filled
 * by the survivors beyond the new size, in order. So keep[i] >= i for every i, keep[i] === i for
 * every row that stays put, and only as many rows move as rows left from below the new size.
 */
export function keptSlots(alive: readonly boolean[]): number[] {
  const size = alive.filter(Boolean).length;
  const tail: number[] = [];
  for (let i = size; i < alive.length; i++) if (alive[i]) tail.push(i);
  const keep: number[] = [];
  for (let i = 0, t = 0; i < size; i++) keep.push(alive[i] ? i : tail[t++]);
  return keep;
}

/**
 * A prompt's key in the prompt cache: its tenant's, never shared with another tenant, whose
 * requests could otherwise tell from a first token's speed that someone else sent that prompt.
 */
const promptKey = (job: GenerationJob) => `${job.tenant}\u0000${job.plan.promptIds.join(",")}`;

/** A kept answer's key: never a prompt's (an answer serves only as the beginning of a longer prompt). */
const answerKey = (tenant: string, ids: readonly number[]) => `${tenant}\u0001${ids.join(",")}`;
const NO_LOGITS = new Float32Array(0);

/** A job's usage: its prompt (when `started`) and the tokens its sequences drew. */
function usageOf(job: GenerationJob, started: boolean): GenerationUsage {
  const prompt = started ? job.plan.promptIds.length : 0;
  const completion = job.sequences.reduce((a, s) => a + s.generated, 0);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** The tokens a request's rows may come to hold: its prompt and max_tokens. */
const spanOf = (plan: RequestPlan) => plan.promptIds.length + plan.request.max_tokens;

/** No finite logit, and at least one NaN: the graph's output, not the request's bans, is at fault. */
function notANumber(logits: Float32Array): boolean {
  let nan = false;
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i]!;
    if (Number.isFinite(v)) return false;
    if (v !== v) nan = true;
  }
  return nan;
}

/** Whether rank `a` comes before rank `b` (compared element by element). */
function before(a: readonly number[], b: readonly number[]): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! < b[i]!;
  return false;
}

/** `e` as the engine's error: itself, or an internal one that says what failed and why. */
function engineError(e: unknown, what: string): EngineError {
  return e instanceof EngineError ? e : new EngineError("internal", `${what}: ${(e as Error)?.message ?? e}`);
}
