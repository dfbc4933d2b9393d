import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { sql } from "drizzle-orm";
import type { DbOrTx } from "../db/client";
import { conflict, unprocessable } from "../errors";

/**
 * Idempotency keys (docs/api.md "Idempotency"), per team. A request with a key first reserves it
 * (insert; the primary key makes concurrent duplicates collide), then runs, then stores its
 * response. Another request with the same key and the same request replays that response; with
 * another request it is a 422; while the first still runs it waits for its response.
 */
export const KEY_TTL_HOURS = 24;
/** A reservation whose request never finished (its process died) is taken over after this. */
const ABANDONED_SECONDS = 120;
/** How long a duplicate waits for the first request's response before a 409. */
const WAIT_MS = 30_000;

export type StoredResponse = { status: number; body: string };

/** SHA-256 of the method, the path and the body with its keys sorted (key order does not matter). */
export function requestHash(method: string, path: string, body: unknown): string {
  return createHash("sha256")
    .update(`${method} ${path}\n${canonicalJson(body)}`)
    .digest("hex");
}

function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  if (v && typeof v === "object") {
    const entries = Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(",")}}`;
  }
  return JSON.stringify(v) ?? "null";
}

/**
 * Runs `run` at most once per (team, key, request) within 24 hours; returns its response, or the
 * stored one (`replayed`). `run`'s failures are not stored: the key is released, and a retry runs
 * again (a failed request writes nothing, so running it again is safe).
 */
export async function withIdempotency(
  db: DbOrTx,
  input: { teamId: string; key: string; hash: string },
  run: () => Promise<StoredResponse>,
): Promise<StoredResponse & { replayed: boolean }> {
  const deadline = Date.now() + WAIT_MS;
  for (let pause = 10; ; pause = Math.min(pause * 2, 200)) {
    if (await reserve(db, input)) break;
    const [row] = await db.execute<{ request_hash: string; status: number | null; response: string | null }>(sql`
      select request_hash, status, response from idempotency_keys
      where team_id = ${input.teamId} and key = ${input.key}
        and created_at >= now() - make_interval(hours => ${KEY_TTL_HOURS})`);
    if (!row) continue; // released or expired meanwhile: reserve again
    if (row.request_hash !== input.hash) {
      throw unprocessable(
        "This Idempotency-Key was used with another request (method, path or body) in the last 24 hours.",
        "Idempotency-Key",
      );
    }
    if (row.status !== null) return { status: row.status, body: row.response ?? "", replayed: true };
    if (Date.now() > deadline) {
      throw conflict("A request with this Idempotency-Key is still being processed; retry later.", "Idempotency-Key");
    }
    await sleep(pause);
  }
  let response: StoredResponse;
  try {
    response = await run();
  } catch (err) {
    await db.execute(sql`
      delete from idempotency_keys
      where team_id = ${input.teamId} and key = ${input.key} and request_hash = ${input.hash} and status is null`);
    throw err;
  }
  await db.execute(sql`
    update idempotency_keys set status = ${response.status}, response = ${response.body}
    where team_id = ${input.teamId} and key = ${input.key} and request_hash = ${input.hash} and status is null`);
  return { ...response, replayed: false };
}

/** Inserts the reservation, or takes over an expired or abandoned one; true when this request owns the key. */
async function reserve(db: DbOrTx, input: { teamId: string; key: string; hash: string }): Promise<boolean> {
  const rows = await db.execute(sql`
    insert into idempotency_keys (team_id, key, request_hash) values (${input.teamId}, ${input.key}, ${input.hash})
    on conflict (team_id, key) do update
      set request_hash = excluded.request_hash, status = null, response = null, created_at = now()
      where idempotency_keys.created_at < now() - make_interval(hours => ${KEY_TTL_HOURS})
         or (idempotency_keys.status is null
             and idempotency_keys.created_at < now() - make_interval(secs => ${ABANDONED_SECONDS}))
    returning key`);
  return rows.length > 0;
}
