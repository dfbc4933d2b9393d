// Stop strings over a text stream: a stop may span any number of tokens, so text that could be
// the beginning of a stop string is held back until it is known not to be one. Emitted text
// therefore never contains a stop string or a partial one.
//
// Each stop string is matched by its Knuth-Morris-Pratt automaton, one step per character: the
// work per token is linear in the token's text, whatever the stops' lengths or how much is held
// back (a suffix scan per token was quadratic in the held text, and a request with long periodic
// stops could hold a worker's event loop, every team's generations with it, for minutes).
export interface StopFeed {
  /** Text safe to emit now. */
  emit: string;
  /** The stop string that matched (generation ends; the stop and anything after it are dropped). */
  matched: string | null;
}

/** KMP failure function: fail[i] = length of the longest proper border of s[0..i]. */
function failureOf(s: string): Int32Array {
  const fail = new Int32Array(s.length);
  for (let i = 1, k = 0; i < s.length; i++) {
    while (k > 0 && s.charCodeAt(i) !== s.charCodeAt(k)) k = fail[k - 1]!;
    if (s.charCodeAt(i) === s.charCodeAt(k)) k++;
    fail[i] = k;
  }
  return fail;
}

export class StopMatcher {
  private held = "";
  private readonly fails: Int32Array[];
  /** Per stop: how many of its first characters the text so far ends with. */
  private readonly states: Int32Array;

  constructor(private readonly stops: readonly string[]) {
    this.fails = stops.map(failureOf);
    this.states = new Int32Array(stops.length);
  }

  push(text: string): StopFeed {
    if (this.stops.length === 0) return { emit: text, matched: null };
    const base = this.held.length;
    this.held += text;
    // The earliest-starting match in the held text (ties: the first stop given), as a scan of
    // the whole text for each stop would find it.
    let first = -1;
    let matched: string | null = null;
    for (let j = 0; j < this.stops.length; j++) {
      const s = this.stops[j]!;
      const fail = this.fails[j]!;
      let k = this.states[j]!;
      for (let i = 0; i < text.length; i++) {
        const c = text.charCodeAt(i);
        while (k > 0 && s.charCodeAt(k) !== c) k = fail[k - 1]!;
        if (s.charCodeAt(k) === c) k++;
        if (k === s.length) {
          const at = base + i + 1 - s.length;
          if (first < 0 || at < first) {
            first = at;
            matched = s;
          }
          break; // this stop's first occurrence; a later one cannot start earlier
        }
      }
      this.states[j] = k;
    }
    if (matched !== null) {
      const emit = this.held.slice(0, first);
      this.held = "";
      this.states.fill(0);
      return { emit, matched };
    }
    // What may still become a stop: the longest prefix of a stop the text ends with.
    let keep = 0;
    for (const k of this.states) if (k > keep) keep = k;
    const emit = this.held.slice(0, this.held.length - keep);
    this.held = this.held.slice(this.held.length - keep);
    return { emit, matched: null };
  }

  /** Text held back when generation ends for another reason: it was not a stop after all. */
  flush(): string {
    const out = this.held;
    this.held = "";
    this.states.fill(0);
    return out;
  }
}
