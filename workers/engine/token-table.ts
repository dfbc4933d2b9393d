// The raw bytes each token id contributes to the output, derived from the tokenizer's vocab and
// decoder type. Used where text must be reasoned about below the string level (bad_words).
import type { PreTrainedTokenizer } from "@huggingface/transformers";
import { BYTE_TO_CHAR } from "./byte-level";

export interface TokenTable {
  /** bytes[id]; empty for special tokens and ids outside the tokenizer's vocab. */
  bytes: Uint8Array[];
}

const BYTE_LEVEL_CHAR_TO_BYTE: Map<string, number> = new Map(BYTE_TO_CHAR.map((c, b) => [c, b]));

const EMPTY = new Uint8Array(0);
const cache = new WeakMap<PreTrainedTokenizer, TokenTable>();

export function tokenTable(tokenizer: PreTrainedTokenizer, logitsSize: number): TokenTable {
  const cached = cache.get(tokenizer);
  if (cached && cached.bytes.length >= logitsSize) return cached;
  const internals = tokenizer as unknown as { _tokenizerJSON?: { decoder?: unknown }; all_special_ids?: number[] };
  const decoderJson = JSON.stringify(internals._tokenizerJSON?.decoder ?? null);
  const byteLevel = decoderJson.includes('"ByteLevel"');
  const special = new Set(internals.all_special_ids ?? []);
  const vocab = tokenizer.get_vocab() as Map<string, number>;
  const size = Math.max(logitsSize, vocab.size);
  const bytes: Uint8Array[] = new Array(size).fill(EMPTY);
  const enc = new TextEncoder();
  for (const [token, id] of vocab) {
    if (special.has(id) || id >= size) continue;
    bytes[id] = byteLevel ? byteLevelBytes(token) : sentencePieceBytes(token, enc);
  }
  const table = { bytes };
  cache.set(tokenizer, table);
  return table;
}

function byteLevelBytes(token: string): Uint8Array {
  const out: number[] = [];
  for (const ch of token) {
    const b = BYTE_LEVEL_CHAR_TO_BYTE.get(ch);
    if (b === undefined) return new TextEncoder().encode(token); // added (non byte-level) token
    out.push(b);
  }
  return Uint8Array.from(out);
}

function sentencePieceBytes(token: string, enc: TextEncoder): Uint8Array {
  const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(token);
  if (m) return Uint8Array.of(parseInt(m[1], 16));
  return enc.encode(token.replace(/\u2581/g, " "));
}
