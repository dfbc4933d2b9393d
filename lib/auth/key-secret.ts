import { createHash, randomBytes } from "node:crypto";

export type KeyKind = "api" | "model";

/**
 * Secrets carry a recognisable prefix so a leaked one can be spotted (and scanned for):
 * `lmp_sk_…` for hosted-API keys, `lmp_mk_…` for model keys, then 32 random bytes in base64url.
 */
export const KEY_PREFIX: Record<KeyKind, string> = { api: "lmp_sk_", model: "lmp_mk_" };
const SECRET_RE = /^lmp_(sk|mk)_[A-Za-z0-9_-]{43}$/;

export function generateKeySecret(kind: KeyKind): string {
  return KEY_PREFIX[kind] + randomBytes(32).toString("base64url");
}

export function hashKeySecret(secret: string): string {
  return createHash("sha256").update(secret).digest("hex");
}

/** The kind a well-formed secret claims to be, or undefined for anything malformed. */
export function secretKind(secret: string): KeyKind | undefined {
  const m = SECRET_RE.exec(secret);
  if (!m) return undefined;
  return m[1] === "sk" ? "api" : "model";
}

/** What lists show: enough to tell keys apart, far too little to use. */
export function displayPrefix(secret: string): string {
  return secret.slice(0, 11);
}
