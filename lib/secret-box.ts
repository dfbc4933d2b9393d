// Secrets the platform must keep but never show again (an upstream deployment's bearer key):
// AES-256-GCM under a key derived with HKDF-SHA256 from AUTH_SECRET, so the database alone (a
// dump, a replica) does not reveal them. Changing AUTH_SECRET makes stored secrets unreadable.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";
import { env } from "./env";

const VERSION = "v1";
const INFO = "secret-box:upstream-keys:v1";

const keyFor = (secret: string) =>
  Buffer.from(hkdfSync("sha256", Buffer.from(secret, "utf8"), Buffer.alloc(0), INFO, 32));

/** `v1.<iv>.<tag>.<ciphertext>`, base64url; `aad` binds it to its row (a copy into another row fails). */
export function seal(plain: string, aad: string, secret = env().AUTH_SECRET): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", keyFor(secret), iv);
  cipher.setAAD(Buffer.from(aad, "utf8"));
  const data = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
  return [VERSION, iv, cipher.getAuthTag(), data]
    .map((p) => (typeof p === "string" ? p : p.toString("base64url")))
    .join(".");
}

export function open(sealed: string, aad: string, secret = env().AUTH_SECRET): string {
  const [version, iv, tag, data] = sealed.split(".");
  if (version !== VERSION || !iv || !tag || data === undefined) throw new Error("not a sealed secret");
  const decipher = createDecipheriv("aes-256-gcm", keyFor(secret), Buffer.from(iv, "base64url"));
  decipher.setAAD(Buffer.from(aad, "utf8"));
  decipher.setAuthTag(Buffer.from(tag, "base64url"));
  return Buffer.concat([decipher.update(Buffer.from(data, "base64url")), decipher.final()]).toString("utf8");
}
