// Continuous batching for one model. Each loop iteration runs one forward pass: either a
// prefill chunk of the request being admitted, or one decode step for every running sequence.
// When both have work they alternate, so a long prompt delays running streams by at most one
// chunk per token. A request's sequences join the running batch after its prompt pass and
// leave as soon as they finish or are cancelled (their KV rows are dropped at that point).
import { Tensor } from "@huggingface/transformers";
import type { GenerationStreamEvent } from "@/lib/contracts/generation";
import { BadWordsGuard } from "./bad-words";
import { EngineError } from "./errors";
import { EventChannel } from "./event-channel";
import { abortError, type GenerationJob } from "./generation-job";
import { BatchCache, prefillCacheFrom, prefillPast, type RowSource } from "./kv-cache";
import type { LoadedModel } from "./model-loader";
import { createPrng, randomSeed } from "./prng";
import type { RequestPlan } from "./request-plan";
import { sampleToken } from "./sampler";
import { Sequence } from "./sequence";
import { tokenTable } from "./token-table";

export interface SchedulerOptions {
  /** Most sequences decoding together. */
  maxBatch?: number;
  /** Most requests waiting for admission; past it, submit fails with `overloaded`. */
  maxQueue?: number;
  /** Prompt tokens per prefill forward pass. */
  prefillChunk?: number;
}

interface Row {
  seq: Sequence;
  job: GenerationJob;
  /** Tokens of this sequence held in the KV cache. */
  cached: number;
}

const int64 = (values: number[], dims: number[]) =>
  new Tensor(
    "int64",
    BigInt64Array.from(values, (v) => BigInt(v)),
    dims,
  );

export class Scheduler {
  private readonly maxBatch: number;
  private readonly maxQueue: number;
  private readonly prefillChunk: number;
  private readonly queue: GenerationJob[] = [];
  private prefilling: GenerationJob | null = null;
  private rows: Row[] = [];
  private joiners: { row: Row; source: RowSource }[] = [];
  private kv: BatchCache | null = null;
  private looping = false;
  private preferPrefill = true;
  private idleWaiters: (() => void)[] = [];

  constructor(
    readonly model: LoadedModel,
    opts: SchedulerOptions = {},
  ) {
    this.maxBatch = opts.maxBatch ?? 16;
    this.maxQueue = opts.maxQueue ?? 64;
    this.prefillChunk = opts.prefillChunk ?? 128;
  }

  /** Current load, for tests, metrics and the worker's registry. */
  stats() {
    return {
      running: this.rows.length,
      queued: this.queue.length,
      prefilling: this.prefilling ? 1 : 0,
      kvColumns: this.kv?.capacity ?? 0,
      kvBytes: this.kv?.bytes ?? 0,
    };
  }

  /** Resolves when the loop has nothing left to do (all rows gone, caches dropped). */
  whenIdle(): Promise<void> {
    if (!this.looping) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  submit(plan: RequestPlan, signal?: AbortSignal): EventChannel<GenerationStreamEvent> {
    const n = plan.request.n;
    if (n > this.maxBatch)
      throw new EngineError("invalid_request", `n (${n}) exceeds this worker's batch size (${this.maxBatch})`, "n");
    if (this.queue.length >= this.maxQueue) {
      throw new EngineError(
        "overloaded",
        `engine overloaded: ${this.queue.length} requests already queued (limit ${this.maxQueue}); retry later`,
      );
    }
    if (signal?.aborted) throw abortError();
    const job = this.createJob(plan);
    signal?.addEventListener("abort", () => this.cancel(job), { once: true });
    this.queue.push(job);
    this.kick();
    return job.channel;
  }

  private createJob(plan: RequestPlan): GenerationJob {
    const m = this.model;
    const table = tokenTable(m.tokenizer, 0);
    const badWords = new BadWordsGuard(table, plan.request.bad_words);
    const seed = plan.seed ?? randomSeed();
    const job: GenerationJob = {
      plan,
      sequences: [],
      channel: new EventChannel<GenerationStreamEvent>(() => this.cancel(job)),
      prefilled: 0,
      prefillKv: null,
      cancelled: false,
      done: false,
    };
    const decode = (ids: number[]) => (ids.length === 0 ? "" : m.tokenizer.decode(ids, { skip_special_tokens: true }));
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
    const queued = this.queue.indexOf(job);
    if (queued >= 0) this.queue.splice(queued, 1);
    if (this.prefilling === job) {
      this.prefilling = null;
      job.prefillKv = null;
    }
    for (const s of job.sequences) s.finish("cancelled", null);
    job.done = true;
    job.channel.end(abortError());
    // Its rows leave the batch (and free their KV) at the next step.
  }

  private kick() {
    if (this.looping) return;
    this.looping = true;
    void this.loop();
  }

  private async loop() {
    try {
      for (;;) {
        this.admit();
        this.reshape();
        const canPrefill = this.prefilling !== null;
        const canDecode = this.rows.length > 0;
        if (!canPrefill && !canDecode) break;
        try {
          if (canPrefill && (!canDecode || this.preferPrefill)) await this.prefillStep(this.prefilling!);
          else await this.decodeStep();
        } catch (e) {
          this.failAll(e);
        }
        this.preferPrefill = !this.preferPrefill;
        await new Promise((r) => setImmediate(r)); // let I/O (new requests, disconnects) in
      }
    } finally {
      this.looping = false;
    }
    if (this.queue.length > 0) this.kick();
    else for (const w of this.idleWaiters.splice(0)) w();
  }

  private admit() {
    if (this.prefilling || this.queue.length === 0) return;
    const occupied = this.rows.length + this.joiners.length;
    if (occupied + this.queue[0].plan.request.n > this.maxBatch) return;
    this.prefilling = this.queue.shift()!;
  }

  /**
   * Drops finished/cancelled rows and adds joiners; copies the cache only when membership
   * changed or it is full.
   */
  private reshape() {
    const keep = this.rows.filter((r) => !r.seq.finished && !r.job.cancelled);
    const joiners = this.joiners.filter((j) => !j.row.seq.finished && !j.row.job.cancelled);
    if (keep.length === this.rows.length && this.joiners.length === 0 && !this.kv?.full) return;
    const sources: RowSource[] = keep.map((r) => this.kv!.source(this.rows.indexOf(r)));
    for (const j of joiners) sources.push(j.source);
    this.rows = [...keep, ...joiners.map((j) => j.row)];
    this.joiners = [];
    this.kv = this.rows.length > 0 ? BatchCache.build(this.model.info.kv, sources) : null;
  }

  private async prefillStep(job: GenerationJob) {
    const m = this.model;
    const ids = job.plan.promptIds;
    const start = job.prefilled;
    const end = Math.min(ids.length, start + this.prefillChunk);
    const positions = Array.from({ length: end - start }, (_, i) => start + i);
    const out = await m.forward({
      input_ids: int64(ids.slice(start, end), [1, end - start]),
      attention_mask: int64(new Array(end).fill(1), [1, end]),
      position_ids: int64(positions, [1, end - start]),
      ...prefillPast(m.info.kv, job.prefillKv),
    });
    if (job.cancelled) return;
    job.prefillKv = prefillCacheFrom(m.info.kv, out);
    job.prefilled = end;
    if (end < ids.length) return;

    this.prefilling = null;
    const logits = out.logits;
    const V = logits.dims[2];
    const row = logits.data.subarray((end - start - 1) * V, (end - start) * V);
    for (const seq of job.sequences) this.sampleInto(seq, job, row);
    const source: RowSource = { buffers: job.prefillKv.buffers, stride: ids.length, row: 0, length: ids.length };
    for (const seq of job.sequences)
      if (!seq.finished) this.joiners.push({ row: { seq, job, cached: ids.length }, source });
    job.prefillKv = null;
    this.settle(job);
  }

  private async decodeStep() {
    const m = this.model;
    const rows = this.rows;
    const kv = this.kv!;
    const B = rows.length;
    const { past, mask } = kv.stepInputs();
    const out = await m.forward(
      {
        input_ids: int64(
          rows.map((r) => r.seq.pendingToken),
          [B, 1],
        ),
        attention_mask: int64(mask, [B, kv.capacity + 1]),
        position_ids: int64(
          rows.map((r) => r.cached),
          [B, 1],
        ),
        ...past,
      },
      kv.fetchNames(),
    );
    kv.append(out);
    const V = out.logits.dims[2];
    const data = out.logits.data;
    const touched = new Set<GenerationJob>();
    rows.forEach((r, i) => {
      r.cached++;
      if (r.job.cancelled || r.seq.finished) return;
      this.sampleInto(r.seq, r.job, data.subarray(i * V, (i + 1) * V));
      touched.add(r.job);
    });
    for (const job of touched) this.settle(job);
  }

  private sampleInto(seq: Sequence, job: GenerationJob, logits: Float32Array) {
    const sample = sampleToken(logits, job.plan.sampling, {
      prng: seq.prng,
      seen: seq.seen,
      banned: seq.bannedNext(),
      fallbackToken: this.model.info.eosTokenIds[0] ?? 0,
    });
    seq.accept(sample);
  }

  /** Ends a job's stream once all its sequences are finished. */
  private settle(job: GenerationJob) {
    if (job.done || !job.sequences.every((s) => s.finished)) return;
    job.done = true;
    const prompt = job.plan.promptIds.length;
    const completion = job.sequences.reduce((a, s) => a + s.generated, 0);
    job.channel.push({
      type: "done",
      usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
    });
    job.channel.end();
  }

  private failAll(e: unknown) {
    const error =
      e instanceof EngineError ? e : new EngineError("internal", `forward pass failed: ${(e as Error)?.message ?? e}`);
    const jobs = new Set<GenerationJob>([...this.rows.map((r) => r.job), ...this.joiners.map((j) => j.row.job)]);
    if (this.prefilling) jobs.add(this.prefilling);
    for (const job of jobs) {
      job.done = true;
      job.channel.end(error);
    }
    this.rows = [];
    this.joiners = [];
    this.kv = null;
    this.prefilling = null;
  }
}
