// Stop strings over a text stream: a stop may span any number of tokens, so text that could be
// the beginning of a stop string is held back until it is known not to be one. Emitted text
// therefore never contains a stop string or a partial one.
export interface StopFeed {
  /** Text safe to emit now. */
  emit: string;
  /** The stop string that matched (generation ends; the stop and anything after it are dropped). */
  matched: string | null;
}

export class StopMatcher {
  private held = "";

  constructor(private readonly stops: readonly string[]) {}

  push(text: string): StopFeed {
    if (this.stops.length === 0) return { emit: text, matched: null };
    this.held += text;
    let first = -1;
    let matched: string | null = null;
    for (const s of this.stops) {
      const at = this.held.indexOf(s);
      if (at >= 0 && (first < 0 || at < first)) {
        first = at;
        matched = s;
      }
    }
    if (matched !== null) {
      const emit = this.held.slice(0, first);
      this.held = "";
      return { emit, matched };
    }
    const keep = this.partialSuffixLength();
    const emit = this.held.slice(0, this.held.length - keep);
    this.held = this.held.slice(this.held.length - keep);
    return { emit, matched: null };
  }

  /** Text held back when generation ends for another reason: it was not a stop after all. */
  flush(): string {
    const out = this.held;
    this.held = "";
    return out;
  }

  /** Length of the longest suffix of the held text that is a proper prefix of some stop. */
  private partialSuffixLength(): number {
    let best = 0;
    for (const s of this.stops) {
      for (let k = Math.min(s.length - 1, this.held.length); k > best; k--) {
        if (this.held.endsWith(s.slice(0, k))) {
          best = k;
          break;
        }
      }
    }
    return best;
  }
}
