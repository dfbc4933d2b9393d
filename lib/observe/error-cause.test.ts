import { describe, expect, it } from "vitest";
import postgres from "postgres";
import { drizzle } from "drizzle-orm/postgres-js";
import { sql } from "drizzle-orm";
import { freePort } from "../net/free-port";
import { errorCause, loggableError } from "./error-cause";

describe("errorCause", () => {
  it("says why a query failed (the driver's reason and code), not its SQL or its values", async () => {
    // Nothing listens on this port: drizzle wraps the refused connection as "Failed query: …".
    const client = postgres(`postgres://u:p@127.0.0.1:${await freePort()}/db`, { max: 1, connect_timeout: 2 });
    const db = drizzle(client);
    const err = await db.execute(sql`select ${"secret search term"}::text`).catch((e: unknown) => e);
    await client.end();
    expect((err as Error).message).toMatch(/^Failed query/);
    const reason = errorCause(err);
    expect(reason).toMatch(/ECONNREFUSED/);
    expect(reason).not.toContain("select");
    const logged = JSON.stringify(loggableError(err));
    expect(logged).toMatch(/ECONNREFUSED/);
    expect(logged).not.toContain("secret search term");
    expect(logged).toContain('"query":"select $1::text"');
  });

  it("passes other errors as they are", () => {
    expect(errorCause(new Error("plain"))).toBe("plain");
    expect(errorCause("text")).toBe("text");
    expect(loggableError({ already: "an object" })).toEqual({ already: "an object" });
  });
});
