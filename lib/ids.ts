import { randomFillSync } from "node:crypto";

const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";

// Random bytes are drawn 4 KiB at a time: `add` makes an id per request, and one randomBytes()
// call per id cost more CPU than the rest of the id (and about a tenth of the add service).
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;

function randomByte(): number {
  if (poolOffset === pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  return pool[poolOffset++]!;
}

/** Random lower-case base36 string (rejection sampling keeps every character uniform). */
export function randomToken(length: number): string {
  let out = "";
  while (out.length < length) {
    const byte = randomByte();
    if (byte >= 252) continue; // 252 = 7 × 36
    out += ALPHABET[byte % 36];
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
  import: "imp",
  deployment: "dep",
  worker: "wrk",
  invite: "inv",
} as const;

/** Ids are `<prefix>_<20 base36 chars>` (about 103 random bits), e.g. `pipe_k3v9…`. */
export function newId(kind: keyof typeof ID_PREFIXES): string {
  return `${ID_PREFIXES[kind]}_${randomToken(20)}`;
}
