import { afterEach, describe, expect, it, vi } from "vitest";
import { resetEnvCache } from "../env";
import { ApiError } from "../errors";
import { addressKey, startGeneration, takeRequest, takeSignIn, teamLimits } from "./index";
import { TokenBuckets } from "./token-bucket";

afterEach(() => {
  vi.useRealTimers();
  resetEnvCache();
});

const limits = (o: Parameters<typeof teamLimits>[0]["limits"] = {}) => teamLimits({ limits: o });
const refusal = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    return e as ApiError;
  }
  throw new Error("not refused");
};

describe("token buckets", () => {
  it("allows `capacity` at once, then refills continuously over the period", () => {
    vi.useFakeTimers({ now: 0 });
    const b = new TokenBuckets(60_000);
    for (let i = 0; i < 3; i++) expect(b.take("k", 3).ok).toBe(true);
    const refused = b.take("k", 3);
    expect(refused.ok).toBe(false);
    expect(refused.state).toMatchObject({ limit: 3, remaining: 0, retryAfterSeconds: 20, resetSeconds: 60 });
    expect(b.take("other", 3).ok).toBe(true); // buckets are per key
    vi.advanceTimersByTime(20_000);
    expect(b.take("k", 3).ok).toBe(true);
    expect(b.take("k", 3).ok).toBe(false);
  });

  it("charges usage after the fact, below zero, and then refuses until it refills", () => {
    vi.useFakeTimers({ now: 0 });
    const b = new TokenBuckets(60_000);
    expect(b.peek("k", 100).ok).toBe(true);
    b.charge("k", 100, 160);
    const { ok, state } = b.peek("k", 100);
    expect(ok).toBe(false);
    expect(state.retryAfterSeconds).toBe(36); // 60 tokens of debt at 100 per minute
    vi.advanceTimersByTime(35_000);
    expect(b.peek("k", 100).ok).toBe(false);
    vi.advanceTimersByTime(1_100);
    expect(b.peek("k", 100).ok).toBe(true);
  });
});

describe("limits", () => {
  it("uses a team's overrides over the defaults", () => {
    expect(limits({ requestsPerMinute: 5 })).toMatchObject({ requestsPerMinute: 5, concurrentStreams: 32 });
  });

  it("refuses past the requests per minute with 429, Retry-After and RateLimit headers", () => {
    const key = `key_${Math.random()}`;
    const l = limits({ requestsPerMinute: 2 });
    expect(takeRequest(key, l)).toMatchObject({ "ratelimit-limit": "2", "ratelimit-remaining": "1" });
    takeRequest(key, l);
    const err = refusal(() => takeRequest(key, l));
    expect(err).toMatchObject({ status: 429, type: "rate_limited" });
    expect(err.headers).toMatchObject({ "ratelimit-remaining": "0", "retry-after": "30" });
  });

  it("bounds the generations running at once per key, and frees the slot when one ends", () => {
    const key = `key_${Math.random()}`;
    const l = limits({ concurrentStreams: 2 });
    const a = startGeneration(key, l);
    startGeneration(key, l);
    expect(refusal(() => startGeneration(key, l)).status).toBe(429);
    a(0);
    a(0); // finishing twice frees one slot only
    startGeneration(key, l);
    expect(refusal(() => startGeneration(key, l)).status).toBe(429);
  });

  it("refuses a new generation once the key's tokens of the minute are spent", () => {
    const key = `key_${Math.random()}`;
    const l = limits({ tokensPerMinute: 50 });
    startGeneration(key, l)(80);
    const err = refusal(() => startGeneration(key, l));
    expect(err.message).toMatch(/used its 50 tokens/);
    expect(Number(err.headers?.["retry-after"])).toBeGreaterThan(30);
  });

  it("limits sign-in attempts per account and per address", () => {
    process.env.SIGNIN_ATTEMPTS_PER_ACCOUNT = "3";
    process.env.SIGNIN_ATTEMPTS_PER_ADDRESS = "5";
    resetEnvCache();
    const tag = Math.random().toString(36).slice(2);
    for (let i = 0; i < 3; i++) takeSignIn(`a-${tag}@x.example`, `addr-${tag}`);
    expect(refusal(() => takeSignIn(`a-${tag}@x.example`, `other-${tag}`)).message).toMatch(/Too many sign-in/);
    // Another account from the same address: the address has 2 attempts left.
    takeSignIn(`b-${tag}@x.example`, `addr-${tag}`);
    takeSignIn(`c-${tag}@x.example`, `addr-${tag}`);
    expect(refusal(() => takeSignIn(`d-${tag}@x.example`, `addr-${tag}`)).status).toBe(429);
    delete process.env.SIGNIN_ATTEMPTS_PER_ACCOUNT;
    delete process.env.SIGNIN_ATTEMPTS_PER_ADDRESS;
  });

  it("counts IPv6 clients by their /64, IPv4 ones by their address", () => {
    expect(addressKey("2001:db8:1:2:aaaa::1")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:0db8:0001:0002:ffff:ffff:ffff:ffff")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:db8::1")).toBe("2001:db8:0:0::/64");
    expect(addressKey("::1")).toBe("0:0:0:0::/64");
    expect(addressKey("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
    expect(addressKey("203.0.113.9")).toBe("203.0.113.9");
    expect(addressKey("::ffff:203.0.113.9")).toBe("203.0.113.9");
    // One /64's addresses share one budget.
    const tag = Math.random().toString(36).slice(2, 6);
    const prefix = `2001:db8:${(parseInt(tag, 36) % 65535).toString(16)}:7`;
    process.env.SIGNIN_ATTEMPTS_PER_ADDRESS = "3";
    resetEnvCache();
    for (let i = 0; i < 3; i++) takeSignIn(`v6-${i}-${tag}@x.example`, `${prefix}::${i + 1}`);
    expect(refusal(() => takeSignIn(`v6-x-${tag}@x.example`, `${prefix}:1:2:3:4`)).status).toBe(429);
    // Another /64 has its own.
    takeSignIn(`v6-y-${tag}@x.example`, `${prefix.replace(/:7$/, ":8")}::1`);
    delete process.env.SIGNIN_ATTEMPTS_PER_ADDRESS;
  });

  it("does not let an address past its limit spend another person's account attempts", () => {
    process.env.SIGNIN_ATTEMPTS_PER_ACCOUNT = "3";
    process.env.SIGNIN_ATTEMPTS_PER_ADDRESS = "2";
    resetEnvCache();
    const tag = Math.random().toString(36).slice(2);
    const victim = `v-${tag}@x.example`;
    takeSignIn(`x1-${tag}@x.example`, `evil-${tag}`);
    takeSignIn(`x2-${tag}@x.example`, `evil-${tag}`);
    for (let i = 0; i < 10; i++) expect(refusal(() => takeSignIn(victim, `evil-${tag}`)).status).toBe(429);
    // The victim, from their own address, still has all their attempts.
    for (let i = 0; i < 2; i++) takeSignIn(victim, `home-${tag}`);
    delete process.env.SIGNIN_ATTEMPTS_PER_ACCOUNT;
    delete process.env.SIGNIN_ATTEMPTS_PER_ADDRESS;
  });
});
