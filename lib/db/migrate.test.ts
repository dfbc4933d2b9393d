import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import journal from "../../drizzle/meta/_journal.json";
import type { EmbeddedDb } from "./embedded";
import { migrateDatabase } from "./migrate";
import { startThrowawayDb } from "./throwaway";

let server: EmbeddedDb;
beforeAll(async () => {
  server = await startThrowawayDb();
}, 60_000);
afterAll(() => server?.stop());

describe("migrateDatabase", () => {
  it("run by several processes at once (a launcher and CLI commands), applies each migration once", async () => {
    const admin = postgres(server.url, { max: 1, onnotice: () => {} });
    await admin`create database racing`;
    await admin.end();
    const url = new URL(server.url);
    url.pathname = "/racing";
    const results = await Promise.allSettled([1, 2, 3].map(() => migrateDatabase(url.toString())));
    expect(results.map((r) => (r.status === "rejected" ? String(r.reason) : "ok"))).toEqual(["ok", "ok", "ok"]);
    const db = postgres(url.toString(), { max: 1, onnotice: () => {} });
    const [{ n }] = await db<{ n: number }[]>`select count(*)::int as n from drizzle.__drizzle_migrations`;
    await db.end();
    expect(n).toBe(journal.entries.length);
  }, 120_000);
});
