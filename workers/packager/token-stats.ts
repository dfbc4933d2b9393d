import type { DatasetStats } from "@/lib/contracts/dataset-options";

/** At most this many bars in a dataset's token histogram. */
const MAX_BINS = 30;

/**
 * Token counts of the included samples, kept as 32-bit integers (1M samples: 4 MB) so that the
 * percentiles are exact: nearest rank, p = sorted[ceil(p × n) − 1].
 */
export class TokenTally {
  private counts = new Uint32Array(1024);
  private n = 0;

  add(tokens: number): void {
    if (this.n === this.counts.length) {
      const bigger = new Uint32Array(this.counts.length * 2);
      bigger.set(this.counts);
      this.counts = bigger;
    }
    this.counts[this.n++] = tokens;
  }

  stats(): NonNullable<DatasetStats["tokens"]> {
    const sorted = this.counts.subarray(0, this.n).sort();
    const rank = (p: number) => (this.n === 0 ? 0 : sorted[Math.max(0, Math.ceil(p * this.n) - 1)]!);
    const max = this.n === 0 ? 0 : sorted[this.n - 1]!;
    let total = 0;
    for (const c of sorted) total += c;
    const binWidth = niceBinWidth(max);
    const bins = new Array<number>(Math.floor(max / binWidth) + 1).fill(0);
    for (const c of sorted) bins[Math.floor(c / binWidth)]!++;
    return { total, p50: rank(0.5), p95: rank(0.95), max, histogram: { binWidth, counts: this.n === 0 ? [] : bins } };
  }
}

/** The smallest of 1, 2, 5, 10, 20, 50, … that fits [0, max] in at most MAX_BINS bins. */
export function niceBinWidth(max: number): number {
  for (let scale = 1; ; scale *= 10) {
    for (const step of [1, 2, 5]) {
      if (Math.floor(max / (step * scale)) + 1 <= MAX_BINS) return step * scale;
    }
  }
}
