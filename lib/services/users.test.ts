import { randomBytes, scryptSync } from "node:crypto";
import { eq } from "drizzle-orm";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type DbHandle } from "../db/client";
import { users } from "../db/schema";
import { createScratchDatabase, startThrowawayDb } from "../db/throwaway";
import type { EmbeddedDb } from "../db/embedded";
import { authenticateUser, signUp } from "./users";

let server: EmbeddedDb;
let database: Awaited<ReturnType<typeof createScratchDatabase>>;
let h: DbHandle;

beforeAll(async () => {
  server = await startThrowawayDb();
  database = await createScratchDatabase(server.url, "users");
  h = connect(database.url, { max: 4 });
}, 60_000);

afterAll(async () => {
  await h?.close();
  await database?.drop();
  await server?.stop();
});

const address = () => `u-${Math.random().toString(36).slice(2, 10)}@example.com`;
const PASSWORD = "correct horse battery";

async function timed<T>(fn: () => Promise<T>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

describe("users", () => {
  it("hashes with scrypt N=2^17 and never inside an open transaction", async () => {
    const watcher = postgres(database.url, { max: 1, onnotice: () => {} });
    let longTransaction = false;
    let watching = true;
    const watch = (async () => {
      while (watching) {
        const rows = await watcher`
          select 1 from pg_stat_activity
          where datname = current_database() and application_name = 'lmplatform'
            and xact_start < now() - interval '100 milliseconds'`;
        if (rows.length > 0) longTransaction = true;
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    const email = address();
    await signUp(h.db, { email, password: PASSWORD, teamName: "Hash Test" });
    watching = false;
    await watch;
    await watcher.end();
    expect(longTransaction).toBe(false);
    const [user] = await h.db.select().from(users).where(eq(users.email, email));
    expect(user!.passwordHash.split("$").slice(0, 4)).toEqual(["scrypt", String(2 ** 17), "8", "1"]);
  });

  it("takes as long for an unknown email as for a wrong password", async () => {
    const email = address();
    await signUp(h.db, { email, password: PASSWORD });
    await authenticateUser(h.db, "nobody@example.com", PASSWORD); // warm-up (the dummy hash is made once)
    const wrong = await timed(() => authenticateUser(h.db, email, "wrong password!"));
    const unknown = await timed(() => authenticateUser(h.db, "nobody@example.com", PASSWORD));
    expect(await authenticateUser(h.db, "nobody@example.com", PASSWORD)).toBeNull();
    // Without the dummy verification an unknown email answered in ~1 ms against hundreds.
    expect(unknown).toBeGreaterThan(wrong * 0.4);
  });

  it("upgrades a hash made with the old, weaker parameters on the next successful sign-in", async () => {
    const email = address();
    const { user } = await signUp(h.db, { email, password: PASSWORD });
    // A hash as earlier versions made it: N = 2^14.
    const salt = randomBytes(16);
    const key = scryptSync(PASSWORD, salt, 32, { N: 16384, r: 8, p: 1 });
    const legacy = `scrypt$16384$8$1$${salt.toString("base64url")}$${key.toString("base64url")}`;
    await h.db.update(users).set({ passwordHash: legacy }).where(eq(users.id, user.id));
    expect(await authenticateUser(h.db, email, PASSWORD)).not.toBeNull();
    // The new hash (N = 2^17, ~0.3 s of one core alone) is written after the sign-in answers: on a
    // busy machine it takes seconds, so the poll waits longer than its default second.
    await expect
      .poll(async () => (await h.db.select().from(users).where(eq(users.id, user.id)))[0]!.passwordHash.split("$")[1], {
        timeout: 20_000,
      })
      .toBe(String(2 ** 17));
    expect(await authenticateUser(h.db, email, PASSWORD)).not.toBeNull();
  });
});
