import { randomBytes, scrypt, timingSafeEqual } from "node:crypto";

/**
 * scrypt with OWASP's parameters for it (N = 2^17, r = 8, p = 1: 128 MiB and a few hundred ms of
 * one libuv thread per hash), so hashing never blocks the event loop. Hashes made with weaker
 * parameters (N = 2^14 before) still verify, and `needsRehash` says to upgrade them.
 */
const N = 2 ** 17;
const R = 8;
const P = 1;
const KEYLEN = 32;

function scryptAsync(password: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password, salt, KEYLEN, { N: n, r, p, maxmem: 256 * n * r }, (err, key) =>
      err ? reject(err) : resolve(key),
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
  dummy ??= hashPassword(randomBytes(16).toString("hex"));
  await verifyPassword(password, await dummy);
  return false;
}
