// Incremental detokenizer (the prefix/read-offset scheme of TGI): decode a short window of
// recent tokens and emit only what it adds over the previous window. Text ending in U+FFFD
// (an incomplete UTF-8 sequence) is held back until the next token completes it, so
// multi-byte characters are never split.
export type Decode = (ids: number[]) => string;

export class IncrementalDetokenizer {
  private ids: number[];
  private prefixOffset: number;
  private readOffset: number;

  /**
   * `context`: the last few prompt tokens. Decoding starts after them, so a first generated
   * token keeps its leading space (sentencepiece decoders strip it at the start of a text).
   */
  constructor(
    private readonly decode: Decode,
    context: number[] = [],
  ) {
    this.ids = context.slice(-5);
    this.prefixOffset = 0;
    this.readOffset = this.ids.length;
  }

  /** Adds a token; returns the newly completed text (possibly empty). */
  push(id: number): string {
    this.ids.push(id);
    const prefixText = this.decode(this.ids.slice(this.prefixOffset, this.readOffset));
    const newText = this.decode(this.ids.slice(this.prefixOffset));
    if (newText.length > prefixText.length && !newText.endsWith("\uFFFD")) {
      this.prefixOffset = this.readOffset;
      this.readOffset = this.ids.length;
      return newText.slice(prefixText.length);
    }
    return "";
  }

  /** At the end: whatever is still held back (a genuinely invalid byte sequence). */
  flush(): string {
    const prefixText = this.decode(this.ids.slice(this.prefixOffset, this.readOffset));
    const newText = this.decode(this.ids.slice(this.prefixOffset));
    this.prefixOffset = this.readOffset = this.ids.length;
    return newText.length > prefixText.length ? newText.slice(prefixText.length) : "";
  }
}
