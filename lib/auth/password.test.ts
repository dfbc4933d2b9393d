import { randomBytes, scryptSync } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ApiError } from "../errors";
import { hashLoad, verifyNothing, verifyPassword } from "./password";

/** A stored hash with cheap parameters (verification uses the stored ones). */
function cheapHash(password: string): string {
  const salt = randomBytes(16);
  const key = scryptSync(password, salt, 32, { N: 1024, r: 8, p: 1 });
  return `scrypt$1024$8$1$${salt.toString("base64url")}$${key.toString("base64url")}`;
}

describe("password hashing", () => {
  it("runs at most 2 hashes at once, queues 64, and refuses more with a 429 the sign-in form shows", async () => {
    const stored = cheapHash("secret words");
    const calls = Array.from({ length: 70 }, (_, i) => verifyPassword(i % 2 ? "secret words" : "wrong", stored));
    expect(hashLoad()).toEqual({ running: 2, waiting: 64 });
    const settled = await Promise.allSettled(calls);
    const refused = settled.filter((r) => r.status === "rejected").map((r) => (r as PromiseRejectedResult).reason);
    expect(refused).toHaveLength(4);
    for (const err of refused) {
      expect(err).toBeInstanceOf(ApiError);
      expect(err).toMatchObject({ status: 429 });
      expect(err.message).toMatch(/^Too many sign-in attempts/);
    }
    // Those run give the right answers, and the pool is free again.
    const answers = settled.slice(0, 66).map((r, i) => [i % 2 === 1, (r as PromiseFulfilledResult<boolean>).value]);
    for (const [expected, got] of answers) expect(got).toBe(expected);
    expect(hashLoad()).toEqual({ running: 0, waiting: 0 });
  });

  it("does not keep a decoy hash the full queue refused: a later unknown email waits for a hash, as a known one does", async () => {
    const stored = cheapHash("x");
    const busy = Array.from({ length: 66 }, () => verifyPassword("x", stored));
    await expect(verifyNothing("guess")).rejects.toMatchObject({ status: 429 });
    await Promise.all(busy);
    await expect(verifyNothing("guess")).resolves.toBe(false);
  }, 30_000);
});
