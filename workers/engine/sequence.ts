// One completion (one of a request's n choices): its tokens, PRNG, detokenizer, stop matcher
// and bad-words tail. `accept` turns a sampled token into stream events.
import type { FinishReason, GeneratedTokenLogprobs, GenerationStreamEvent } from "@/lib/contracts/generation";
import { appendTail, type BadWordsGuard } from "./bad-words";
import { IncrementalDetokenizer, type Decode } from "./detokenizer";
import type { Prng } from "./prng";
import type { SampleResult } from "./sampler";
import { StopMatcher } from "./stop-matcher";
import type { TokenTable } from "./token-table";

export interface SequenceDeps {
  decode: Decode;
  table: TokenTable;
  eosTokenIds: number[];
  badWords: BadWordsGuard;
  stops: readonly string[];
  maxTokens: number;
  wantLogprobs: boolean;
  emit: (e: GenerationStreamEvent) => void;
}

export class Sequence {
  readonly tokens: number[];
  readonly seen: Set<number>;
  generated = 0;
  finished: { reason: FinishReason; stop: string | null } | null = null;
  /** The last sampled token, fed to the model at the next decode step. */
  pendingToken = -1;
  private badTail: Uint8Array;
  private readonly detok: IncrementalDetokenizer;
  private readonly stop: StopMatcher;

  constructor(
    readonly index: number,
    promptIds: number[],
    readonly prng: Prng,
    private readonly deps: SequenceDeps,
  ) {
    this.tokens = [...promptIds];
    this.seen = new Set(promptIds);
    this.detok = new IncrementalDetokenizer(deps.decode, promptIds);
    this.stop = new StopMatcher(deps.stops);
    // The prompt's last bytes count too: a bad word may not be completed across the boundary.
    let tail: Uint8Array = new Uint8Array(0);
    for (const id of promptIds.slice(-deps.badWords.maxTail))
      tail = appendTail(tail, deps.table.bytes[id] ?? new Uint8Array(0), deps.badWords.maxTail);
    this.badTail = tail;
  }

  /** Banned token lists for the next step (bad_words). */
  bannedNext(): number[][] {
    if (!this.deps.badWords.active) return [];
    return [this.deps.badWords.alwaysBanned, this.deps.badWords.bannedAfter(this.badTail)];
  }

  accept(sample: SampleResult) {
    const { emit } = this.deps;
    const id = sample.id;
    if (this.deps.eosTokenIds.includes(id)) return this.finish("stop", null);
    this.generated++;
    this.tokens.push(id);
    this.seen.add(id);
    this.pendingToken = id;
    this.badTail = appendTail(this.badTail, this.deps.table.bytes[id] ?? new Uint8Array(0), this.deps.badWords.maxTail);
    const logprobs = this.deps.wantLogprobs ? [this.logprobEntry(sample)] : undefined;
    let fed = this.stop.push(this.detok.push(id));
    if (!fed.matched && this.generated >= this.deps.maxTokens) {
      const rest = this.stop.push(this.detok.flush());
      fed = { emit: fed.emit + rest.emit, matched: rest.matched };
    }
    if (fed.emit || logprobs)
      emit({ type: "delta", index: this.index, text: fed.emit, ...(logprobs ? { logprobs } : {}) });
    if (fed.matched) this.finish("stop", fed.matched);
    else if (this.generated >= this.deps.maxTokens) this.finish("length", null);
  }

  finish(reason: FinishReason, stop: string | null) {
    if (this.finished) return;
    if (reason !== "cancelled" && stop === null) {
      const rest = this.stop.push(this.detok.flush());
      const text = rest.emit + (rest.matched ? "" : this.stop.flush());
      if (text) this.deps.emit({ type: "delta", index: this.index, text });
      if (rest.matched) stop = rest.matched;
    }
    this.finished = { reason, stop };
    this.deps.emit({ type: "finish", index: this.index, finish_reason: reason, stop });
  }

  private logprobEntry(s: SampleResult): GeneratedTokenLogprobs {
    const tok = (id: number) => this.deps.decode([id]);
    return {
      token: tok(s.id),
      token_id: s.id,
      logprob: s.logprob,
      top_logprobs: (s.top ?? []).map((t) => ({ token: tok(t.id), token_id: t.id, logprob: t.logprob })),
    };
  }
}
