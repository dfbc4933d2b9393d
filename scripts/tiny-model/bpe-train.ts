import { BYTE_TO_CHAR, byteLevelWords } from "../../workers/engine/byte-level";

export interface TrainedBpe {
  /** token string (byte-level chars) -> id; ids 0..255 are the single bytes in byte order. */
  vocab: Map<string, number>;
  merges: [string, string][];
}

/** Deterministic byte-level BPE training: most frequent pair first, ties broken by string order. */
export function trainBpe(texts: readonly string[], maxMerges: number): TrainedBpe {
  const wordCounts = new Map<string, number>();
  for (const t of texts) for (const w of byteLevelWords(t)) wordCounts.set(w, (wordCounts.get(w) ?? 0) + 1);
  const words = [...wordCounts.entries()]
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .map(([w, count]) => ({ symbols: Array.from(w), count }));

  const vocab = new Map<string, number>();
  BYTE_TO_CHAR.forEach((c, i) => vocab.set(c, i));
  const merges: [string, string][] = [];

  for (let m = 0; m < maxMerges; m++) {
    const pairs = new Map<string, number>();
    for (const { symbols, count } of words) {
      for (let i = 0; i + 1 < symbols.length; i++) {
        const key = `${symbols[i]} ${symbols[i + 1]}`;
        pairs.set(key, (pairs.get(key) ?? 0) + count);
      }
    }
    let best: string | null = null;
    let bestCount = 1; // a pair seen once is not worth a token
    for (const [key, count] of pairs) {
      if (count > bestCount || (count === bestCount && best !== null && key < best)) {
        best = key;
        bestCount = count;
      }
    }
    if (best === null) break;
    const [a, b] = best.split(" ");
    const merged = a + b;
    merges.push([a, b]);
    if (!vocab.has(merged)) vocab.set(merged, vocab.size);
    for (const w of words) {
      const out: string[] = [];
      for (let i = 0; i < w.symbols.length; i++) {
        if (i + 1 < w.symbols.length && w.symbols[i] === a && w.symbols[i + 1] === b) {
          out.push(merged);
          i++;
        } else out.push(w.symbols[i]);
      }
      w.symbols = out;
    }
  }
  return { vocab, merges };
}

/** Tokenizes with the trained merges (rank order), used for the model's bigram statistics. */
export function encodeWithBpe(bpe: TrainedBpe, text: string): number[] {
  const rank = new Map(bpe.merges.map(([a, b], i) => [`${a} ${b}`, i]));
  const ids: number[] = [];
  for (const word of byteLevelWords(text)) {
    let symbols = Array.from(word);
    for (;;) {
      let bestI = -1;
      let bestRank = Infinity;
      for (let i = 0; i + 1 < symbols.length; i++) {
        const r = rank.get(`${symbols[i]} ${symbols[i + 1]}`);
        if (r !== undefined && r < bestRank) {
          bestRank = r;
          bestI = i;
        }
      }
      if (bestI < 0) break;
      symbols = [...symbols.slice(0, bestI), symbols[bestI] + symbols[bestI + 1], ...symbols.slice(bestI + 2)];
    }
    for (const s of symbols) ids.push(bpe.vocab.get(s)!);
  }
  return ids;
}
