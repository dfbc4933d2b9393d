// bad_words guarantee: before each sampling step, ban every token that would complete an
// occurrence of a bad word in the output bytes — whether the word lies wholly inside the token
// or starts in the text already produced (any split, any leading space). Checked on bytes, so a
// word cannot slip through across token or multi-byte boundaries. EOS is never banned, so a
// sequence can always end instead.
import type { TokenTable } from "./token-table";

export class BadWordsGuard {
  private readonly words: Uint8Array[];
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
    this.maxTail = Math.max(0, ...this.words.map((w) => w.length - 1));
    const banned: number[] = [];
    table.bytes.forEach((b, id) => {
      if (this.words.some((w) => indexOf(b, w) >= 0)) banned.push(id);
    });
    this.alwaysBanned = banned;
  }

  get active() {
    return this.words.length > 0;
  }

  /** Tokens that must not follow output ending in `tail` (the last `maxTail` output bytes). */
  bannedAfter(tail: Uint8Array): number[] {
    const out: number[] = [];
    this.words.forEach((w, wi) => {
      for (let k = 1; k < w.length; k++) {
        if (k > tail.length || !endsWith(tail, w, k)) continue;
        out.push(...this.completing(wi, k));
      }
    });
    return out;
  }

  private completing(wi: number, k: number): number[] {
    const key = `${wi}:${k}`;
    let ids = this.completions.get(key);
    if (!ids) {
      const rest = this.words[wi].subarray(k);
      ids = [];
      this.table.bytes.forEach((b, id) => {
        if (b.length >= rest.length && startsWith(b, rest)) ids!.push(id);
      });
      this.completions.set(key, ids);
    }
    return ids;
  }
}

function startsWith(b: Uint8Array, prefix: Uint8Array) {
  for (let i = 0; i < prefix.length; i++) if (b[i] !== prefix[i]) return false;
  return true;
}

/** Does `tail` end with the first k bytes of `w`? */
function endsWith(tail: Uint8Array, w: Uint8Array, k: number) {
  const off = tail.length - k;
  for (let i = 0; i < k; i++) if (tail[off + i] !== w[i]) return false;
  return true;
}

function indexOf(hay: Uint8Array, needle: Uint8Array): number {
  outer: for (let i = 0; i + needle.length <= hay.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

/** Keeps the last `max` bytes of a growing byte sequence. */
export function appendTail(tail: Uint8Array, add: Uint8Array, max: number): Uint8Array {
  if (max === 0) return tail;
  const joined = new Uint8Array(tail.length + add.length);
  joined.set(tail);
  joined.set(add, tail.length);
  return joined.length > max ? joined.slice(joined.length - max) : joined;
}
