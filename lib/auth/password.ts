import { randomBytes, scrypt, timingSafeEqual } from "node:crypto";
import { rateLimited } from "../errors";

/**
 * scrypt with OWASP's parameters for it (N = 2^17, r = 8, p = 1: 128 MiB and a few hundred ms of
 * one libuv thread per hash), so hashing never blocks the event loop. Hashes made with weaker
 * parameters (N = 2^14 before) still verify, and `needsRehash` says to upgrade them.
 */
const N = 2 ** 17;
const R = 8;
const P = 1;
const KEYLEN = 32;

/**
 * Hashes run on libuv's thread pool (4 threads), which file reads and writes, DNS lookups and
 * compression share: at most 2 at once, so sign-ins never take the pool from every team's blob
 * reads, imports and upstream connections. At most 64 wait; past that a sign-in is refused (429,
 * "Too many sign-in attempts …", which the sign-in form shows as is) rather than queued for ever.
 */
const HASHES_AT_ONCE = 2;
const HASHES_WAITING = 64;
let hashing = 0;
const waiting: (() => void)[] = [];

async function hashSlot<T>(work: () => Promise<T>): Promise<T> {
  if (hashing >= HASHES_AT_ONCE) {
    if (waiting.length >= HASHES_WAITING)
      throw rateLimited("Too many sign-in attempts on this server at once; try again in a few seconds.", {
        "retry-after": "5",
      });
    await new Promise<void>((resolve) => waiting.push(resolve));
  } else hashing++;
  try {
    return await work();
  } finally {
    const next = waiting.shift();
    if (next) next();
    else hashing--;
  }
}

/** Hashes under way and waiting (tests). */
export const hashLoad = () => ({ running: hashing, waiting: waiting.length });

function scryptAsync(password: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  return hashSlot(
    () =>
      new Promise<Buffer>((resolve, reject) =>
        scrypt(password, salt, KEYLEN, { N: n, r, p, maxmem: 256 * n * r }, (err, key) =>
          err ? reject(err) : resolve(key),
        ),
      ),
  );
}

/** `scrypt$N$r$p$salt$hash`, salt and hash in base64url. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scryptAsync(password, salt, N, R, P);
  return `scrypt$${N}$${R}$${P}$${salt.toString("base64url")}$${key.toString("base64url")}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split("$");
  if (scheme !== "scrypt" || !salt || !hash) return false;
  const expected = Buffer.from(hash, "base64url");
  const key = await scryptAsync(password, Buffer.from(salt, "base64url"), Number(n), Number(r), Number(p));
  return key.length === expected.length && timingSafeEqual(key, expected);
}

/** True for a hash made with weaker parameters than today's. */
export function needsRehash(stored: string): boolean {
  const [scheme, n, r, p] = stored.split("$");
  return scheme !== "scrypt" || Number(n) < N || Number(r) < R || Number(p) < P;
}

let dummy: Promise<string> | undefined;

/**
 * Spends the time of one verification without a user: a sign-in for an unknown email then takes
 * as long as one with a wrong password, so timing does not tell which emails have accounts.
 */
export async function verifyNothing(password: string): Promise<false> {
  // A decoy refused by a full hash queue (429) is not kept: every later unknown email would get
  // that refusal at once, where a known one waits for its hash, and timing would tell them apart.
  dummy ??= hashPassword(randomBytes(16).toString("hex")).catch((err: unknown) => {
    dummy = undefined;
    throw err;
  });
  await verifyPassword(password, await dummy);
  return false;
}
