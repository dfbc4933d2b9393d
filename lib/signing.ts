import { createHmac, timingSafeEqual } from "node:crypto";
import { env } from "./env";

/**
 * Signed, expiring URLs: `{PUBLIC_URL}{path}?expires=<unix seconds>&signature=<hex>`,
 * HMAC-SHA256 over the path and expiry with a key derived from AUTH_SECRET. Used for sample
 * content and dataset downloads; no other credential is needed to follow one.
 */
function signingKey(): Buffer {
  return createHmac("sha256", env().AUTH_SECRET).update("signed-url:v1").digest();
}

let key: Buffer | undefined;
function sign(pathname: string, expires: number): string {
  key ??= signingKey();
  return createHmac("sha256", key).update(`${pathname}\n${expires}`).digest("hex");
}

export function signedUrl(pathname: string, ttlSeconds = env().SIGNED_URL_TTL_SECONDS, now = Date.now()): string {
  const expires = Math.floor(now / 1000) + ttlSeconds;
  return `${env().PUBLIC_URL}${pathname}?expires=${expires}&signature=${sign(pathname, expires)}`;
}

export type SignatureCheck = { ok: true } | { ok: false; reason: "missing" | "invalid" | "expired" };

export function verifySignedUrl(url: URL, now = Date.now()): SignatureCheck {
  const expires = url.searchParams.get("expires");
  const signature = url.searchParams.get("signature");
  if (!expires || !signature) return { ok: false, reason: "missing" };
  if (!/^\d{1,12}$/.test(expires) || !/^[0-9a-f]{64}$/.test(signature)) return { ok: false, reason: "invalid" };
  const expected = Buffer.from(sign(url.pathname, Number(expires)), "hex");
  if (!timingSafeEqual(expected, Buffer.from(signature, "hex"))) return { ok: false, reason: "invalid" };
  if (Number(expires) * 1000 <= now) return { ok: false, reason: "expired" };
  return { ok: true };
}
