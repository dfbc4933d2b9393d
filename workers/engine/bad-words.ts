// bad_words guarantee: before each sampling step, ban every token that would complete an
// occurrence of a bad word in the output bytes — whether the word lies wholly inside the token
// or starts in the text already produced (any split, any leading space). Checked on bytes, so a
// word cannot slip through across token or multi-byte boundaries. EOS is never banned, so a
// sequence can always end instead.
import type { TokenTable } from "./token-table";

export class BadWordsGuard {
  private readonly words: Uint8Array[];
  /** KMP failure function of each word: fail[i] = longest proper border of word[0..i]. */
  private readonly fail: Int32Array[];
  /** Tokens whose own bytes contain a bad word: banned at every step. */
  readonly alwaysBanned: number[];
  /** (word index, matched prefix length k) → tokens whose bytes start with word[k:]. */
  private readonly completions = new Map<string, number[]>();
  readonly maxTail: number;

  constructor(
    private readonly table: TokenTable,
    badWords: string[],
  ) {
    const enc = new TextEncoder();
    this.words = badWords.map((w) => enc.encode(w)).filter((w) => w.length > 0);
    this.fail = this.words.map(failureFunction);
    this.maxTail = Math.max(0, ...this.words.map((w) => w.length - 1));
    const banned: number[] = [];
    // A scan of the whole vocabulary (tens of ms for 64 words on a 128k vocabulary): only for
    // words, and once per list (guardFor keeps the recent ones).
    if (this.words.length > 0)
      table.bytes.forEach((b, id) => {
        if (this.words.some((w, wi) => contains(b, w, this.fail[wi]!))) banned.push(id);
      });
    this.alwaysBanned = banned;
  }

  get active() {
    return this.words.length > 0;
  }

  /**
   * Tokens that must not follow output ending in `tail` (the last `maxTail` output bytes). Per
   * step, O(tail + matches) per word: the KMP automaton runs over the tail once, and the chain of
   * borders of its final state lists every prefix of the word that the output ends with.
   */
  bannedAfter(tail: Uint8Array): number[] {
    const out: number[] = [];
    this.words.forEach((w, wi) => {
      const fail = this.fail[wi]!;
      let k = 0;
      for (const byte of tail) {
        while (k > 0 && (k === w.length || w[k] !== byte)) k = fail[k - 1]!;
        if (w[k] === byte) k++;
      }
      if (k === w.length) k = fail[k - 1]!; // a whole word in the tail was banned when it formed
      for (; k > 0; k = fail[k - 1]!) {
        for (const id of this.completing(wi, k)) out.push(id);
      }
    });
    return out;
  }

  private completing(wi: number, k: number): number[] {
    const key = `${wi}:${k}`;
    let ids = this.completions.get(key);
    if (!ids) {
      ids = tokensStartingWith(this.table, this.words[wi]!.subarray(k));
      this.completions.set(key, ids);
    }
    return ids;
  }
}

function failureFunction(w: Uint8Array): Int32Array {
  const fail = new Int32Array(w.length);
  for (let i = 1, k = 0; i < w.length; i++) {
    while (k > 0 && w[i] !== w[k]) k = fail[k - 1]!;
    if (w[i] === w[k]) k++;
    fail[i] = k;
  }
  return fail;
}

/** Does `hay` contain `w`? (KMP: linear in both.) */
function contains(hay: Uint8Array, w: Uint8Array, fail: Int32Array): boolean {
  if (hay.length < w.length) return false;
  for (let i = 0, k = 0; i < hay.length; i++) {
    while (k > 0 && hay[i] !== w[k]) k = fail[k - 1]!;
    if (hay[i] === w[k] && ++k === w.length) return true;
  }
  return false;
}

/**
 * The token ids of a table sorted by their bytes, once per table: the tokens that start with some
 * bytes are then one contiguous range, found by binary search instead of a scan of the vocabulary.
 */
const sortedIds = new WeakMap<TokenTable, Int32Array>();

function compare(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

function tokensStartingWith(table: TokenTable, prefix: Uint8Array): number[] {
  let ids = sortedIds.get(table);
  if (!ids) {
    ids = Int32Array.from(table.bytes.keys()).sort((x, y) => compare(table.bytes[x]!, table.bytes[y]!));
    sortedIds.set(table, ids);
  }
  const bytes = table.bytes;
  // First id whose bytes are >= prefix; every token starting with prefix follows it contiguously.
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compare(bytes[ids[mid]!]!, prefix) < 0) lo = mid + 1;
    else hi = mid;
  }
  const out: number[] = [];
  for (let i = lo; i < ids.length; i++) {
    const b = bytes[ids[i]!]!;
    if (b.length < prefix.length || !startsWith(b, prefix)) break;
    out.push(ids[i]!);
  }
  return out;
}

function startsWith(b: Uint8Array, prefix: Uint8Array) {
  for (let i = 0; i < prefix.length; i++) if (b[i] !== prefix[i]) return false;
  return true;
}

/** Keeps the last `max` bytes of a growing byte sequence. */
export function appendTail(tail: Uint8Array, add: Uint8Array, max: number): Uint8Array {
  if (max === 0) return tail;
  const joined = new Uint8Array(tail.length + add.length);
  joined.set(tail);
  joined.set(add, tail.length);
  return joined.length > max ? joined.slice(joined.length - max) : joined;
}

const GUARDS_KEPT = 32;
const guards = new WeakMap<TokenTable, Map<string, BadWordsGuard>>();

/**
 * The guard of a word list on a table: made once and kept for the next requests with the same
 * list (a client sends its list with every request), the 32 most recently used per table. A
 * guard holds no per-request state.
 */
export function guardFor(table: TokenTable, badWords: string[]): BadWordsGuard {
  let kept = guards.get(table);
  if (!kept) guards.set(table, (kept = new Map()));
  const key = JSON.stringify(badWords);
  let guard = kept.get(key);
  if (guard) kept.delete(key);
  else guard = new BadWordsGuard(table, badWords);
  kept.set(key, guard); // most recently used last
  if (kept.size > GUARDS_KEPT) kept.delete(kept.keys().next().value!);
  return guard;
}
