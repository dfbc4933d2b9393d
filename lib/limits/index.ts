// Rate limits and quotas (docs/api.md "Limits"). Counted per app process: with several app
// processes behind a load balancer, each enforces the limits on the traffic it serves.
import { isIP } from "node:net";
import type { TeamLimitOverrides, TeamLimits } from "../contracts/limits";
import { env } from "../env";
import { rateLimited } from "../errors";
import { TokenBuckets, type BucketState } from "./token-bucket";

const MINUTE = 60_000;

/**
 * Kept on globalThis, like the database pool: Next.js loads the App Router's routes and the Pages
 * Router's API routes as separate bundles, each with its own copy of this module.
 */
const state = ((globalThis as unknown as { __lmpLimits?: LimiterState }).__lmpLimits ??= {
  requests: new TokenBuckets(MINUTE),
  tokens: new TokenBuckets(MINUTE),
  signIns: new TokenBuckets(15 * MINUTE),
  running: new Map<string, number>(),
});
type LimiterState = {
  requests: TokenBuckets;
  tokens: TokenBuckets;
  signIns: TokenBuckets;
  running: Map<string, number>;
};
const { requests, tokens, signIns, running } = state;

/** A team's limits: its overrides over the defaults. */
export function teamLimits(team: { limits?: TeamLimitOverrides | null }): TeamLimits {
  const e = env();
  const o = team.limits ?? {};
  return {
    requestsPerMinute: o.requestsPerMinute ?? e.RATE_LIMIT_REQUESTS_PER_MINUTE,
    tokensPerMinute: o.tokensPerMinute ?? e.RATE_LIMIT_TOKENS_PER_MINUTE,
    concurrentStreams: o.concurrentStreams ?? e.RATE_LIMIT_CONCURRENT_STREAMS,
    datasetJobs: o.datasetJobs ?? e.RATE_LIMIT_DATASET_JOBS,
    importJobs: o.importJobs ?? e.RATE_LIMIT_IMPORT_JOBS,
    modelDeployments: o.modelDeployments ?? e.RATE_LIMIT_MODEL_DEPLOYMENTS,
  };
}

/** IETF draft-ietf-httpapi-ratelimit-headers names; Retry-After on refusals. */
export function rateLimitHeaders(state: BucketState): Record<string, string> {
  return {
    "ratelimit-limit": String(state.limit),
    "ratelimit-remaining": String(state.remaining),
    "ratelimit-reset": String(state.resetSeconds),
    ...(state.retryAfterSeconds > 0 ? { "retry-after": String(state.retryAfterSeconds) } : {}),
  };
}

/**
 * The limits' id of a signed-in member acting in a team from the dashboard: counted like a key
 * of the team, one per member, so the dashboard's playground and its API routes have the limits
 * an API key has.
 */
export const memberLimitId = (userId: string, teamId: string) => `member:${userId}:${teamId}`;
/** Whether a quota's id is a member's (memberLimitId), not an API or model key's. */
export const isMemberLimitId = (id: string) => id.startsWith("member:");

/** Who a refusal speaks of. */
const subject = (keyId: string) => (isMemberLimitId(keyId) ? "Your dashboard session" : "This key");

/** One request of `keyId`; throws 429 past the team's requests per minute. Returns the headers to send. */
export function takeRequest(keyId: string, limits: TeamLimits): Record<string, string> {
  const { ok, state } = requests.take(keyId, limits.requestsPerMinute);
  const headers = rateLimitHeaders(state);
  if (!ok) {
    throw rateLimited(
      `${subject(keyId)} made more than ${limits.requestsPerMinute} requests in a minute; retry in ${state.retryAfterSeconds} s.`,
      headers,
    );
  }
  return headers;
}

/**
 * Before a generation: the key's token budget must not be spent, and fewer than the team's
 * concurrent streams may be running for it. Returns `finish(usedTokens)`, to call exactly once
 * when the generation ends (however it ends): it frees the slot and charges the tokens.
 */
export function startGeneration(keyId: string, limits: TeamLimits): (usedTokens: number) => void {
  const budget = tokens.peek(keyId, limits.tokensPerMinute);
  if (!budget.ok) {
    throw rateLimited(
      `${subject(keyId)} used its ${limits.tokensPerMinute} tokens of the last minute; retry in ${budget.state.retryAfterSeconds} s.`,
      rateLimitHeaders(budget.state),
    );
  }
  const n = running.get(keyId) ?? 0;
  if (n >= limits.concurrentStreams) {
    throw rateLimited(
      `${subject(keyId)} already has ${n} generations running (limit ${limits.concurrentStreams}); retry when one ends.`,
      { "retry-after": "1" },
    );
  }
  running.set(keyId, n + 1);
  let done = false;
  return (usedTokens) => {
    if (done) return;
    done = true;
    const left = (running.get(keyId) ?? 1) - 1;
    if (left > 0) running.set(keyId, left);
    else running.delete(keyId);
    if (usedTokens > 0) tokens.charge(keyId, limits.tokensPerMinute, usedTokens);
  };
}

/**
 * A sign-up from `address`: it hashes a password as a sign-in does, so it counts against the
 * same per-address attempts (per 15 minutes); 429 past them.
 */
export function takeSignUp(address: string | undefined): void {
  if (address)
    takeAttempt(
      `address:${addressKey(address)}`,
      env().SIGNIN_ATTEMPTS_PER_ADDRESS,
      "sign-ups and sign-ins from this address",
    );
}

/**
 * The per-address limits' key: an IPv4 address as is, an IPv6 address by its /64 (one host, or
 * one customer of an ISP, holds a whole /64: keyed by the full address, it had 2^64 budgets).
 */
export function addressKey(address: string): string {
  const bare = address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, "").replace(/%.*$/, "");
  if (isIP(bare) !== 6) return bare;
  const [head, tail = ""] = bare.toLowerCase().split("::");
  const left = head ? head.split(":") : [];
  const right = tail ? tail.split(":") : [];
  // An embedded IPv4 tail (::ffff:1.2.3.4 in other spellings) is two groups; only the first 4 matter.
  const groups = bare.includes("::") ? [...left, ...Array(8 - left.length - right.length).fill("0"), ...right] : left;
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+/, "") || "0")
    .join(":")}::/64`;
}

/**
 * A sign-in attempt for `email` from `address`: 429 past either limit (per 15 minutes). The
 * address is taken first: an address past its limit is refused before the account is charged,
 * so one client cannot spend other people's account attempts (and lock them out) for ever.
 */
export function takeSignIn(email: string, address: string | undefined): void {
  const e = env();
  if (address) takeAttempt(`address:${addressKey(address)}`, e.SIGNIN_ATTEMPTS_PER_ADDRESS, "sign-in attempts");
  takeAttempt(`account:${email}`, e.SIGNIN_ATTEMPTS_PER_ACCOUNT, "sign-in attempts");
}

/** One attempt in the `key` bucket of sign-ins (per 15 minutes); 429 "Too many `what`" past `limit`. */
function takeAttempt(key: string, limit: number, what: string): void {
  const { ok, state } = signIns.take(key, limit);
  if (!ok)
    throw rateLimited(
      `Too many ${what}; try again in ${Math.ceil(state.retryAfterSeconds / 60)} min.`,
      rateLimitHeaders(state),
    );
}
