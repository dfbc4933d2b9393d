// GPT-2's reversible byte <-> printable-unicode mapping and pre-tokenization regex,
// identical to what the HF `ByteLevel` pre-tokenizer/decoder uses.
export const BYTE_TO_CHAR: readonly string[] = (() => {
  const bs: number[] = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  }
  const table: string[] = new Array(256);
  bs.forEach((b, i) => (table[b] = String.fromCodePoint(cs[i])));
  return table;
})();

export const PRETOKENIZE = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

/** Splits text into pre-tokens, each mapped to byte-level characters. */
export function byteLevelWords(text: string): string[] {
  const enc = new TextEncoder();
  return (text.match(PRETOKENIZE) ?? []).map((w) => Array.from(enc.encode(w), (b) => BYTE_TO_CHAR[b]).join(""));
}
