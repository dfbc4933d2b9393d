import { randomBytes } from "node:crypto";

const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";

/** Random lower-case base36 string (rejection sampling keeps every character uniform). */
export function randomToken(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte >= 252) continue; // 252 = 7 × 36
      out += ALPHABET[byte % 36];
      if (out.length === length) break;
    }
  }
  return out;
}

export const ID_PREFIXES = {
  team: "team",
  user: "usr",
  key: "key",
  pipeline: "pipe",
  sample: "smp",
  dataset: "data",
  deployment: "dep",
  worker: "wrk",
} as const;

/** Ids are `<prefix>_<20 base36 chars>` (about 103 random bits), e.g. `pipe_k3v9…`. */
export function newId(kind: keyof typeof ID_PREFIXES): string {
  return `${ID_PREFIXES[kind]}_${randomToken(20)}`;
}
