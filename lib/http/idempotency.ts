import { invalidRequest } from "../errors";
import type { DbHandle } from "../db/client";
import { requestHash, withIdempotency } from "../services/idempotency";

/** `Idempotency-Key`: 1-255 printable ASCII characters (as Stripe's and the IETF draft's). */
const KEY = /^[\x20-\x7e]{1,255}$/;

/** The header's key, or undefined without one; a 400 naming the header when it is malformed. */
export function idempotencyKeyOf(value: string | string[] | null | undefined): string | undefined {
  if (value === null || value === undefined) return undefined;
  const key = Array.isArray(value) ? value.join(",") : value;
  if (!KEY.test(key)) {
    throw invalidRequest("Invalid 'Idempotency-Key': must be 1-255 printable ASCII characters.", "Idempotency-Key");
  }
  return key;
}

export type JsonResult = { status: number; json: string; replayed: boolean };

/**
 * A write's JSON response, run once per idempotency key (when the request has one; otherwise
 * just run). The wrappers (apiRoute, nodeApiRoute) call it after auth and body validation.
 */
export async function idempotentJson(
  handle: DbHandle,
  input: { teamId: string; key: string | undefined; method: string; path: string; body: unknown; status: number },
  run: () => Promise<unknown>,
): Promise<JsonResult> {
  const once = async () => ({ status: input.status, body: JSON.stringify(await run()) });
  if (input.key === undefined) {
    const r = await once();
    return { status: r.status, json: r.body, replayed: false };
  }
  const hash = requestHash(input.method, input.path, input.body);
  const result = await withIdempotency(handle.db, { teamId: input.teamId, key: input.key, hash }, once);
  return { status: result.status, json: result.body, replayed: result.replayed };
}
