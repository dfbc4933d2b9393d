import postgres from "postgres";
import { describe, expect, inject, it } from "vitest";
import { client, makeTeam } from "../helpers/context";

/**
 * The database is a real server on both projects (the embedded PostgreSQL and the system one):
 * one client's open transaction must not hold anyone else up, as it did when the embedded
 * database was one PGlite backend behind a lock.
 */
describe("database", () => {
  it("keeps answering /v1 requests while another client idles inside an open transaction", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    const pipeline = (await api.post("/v1/pipelines/create", { name: "while idle" })).json;

    // A psql-like session: BEGIN, read and write, then wait without committing.
    const idle = postgres(inject("databaseUrl"), { max: 1, onnotice: () => {} });
    const session = await idle.reserve();
    try {
      await session`begin`;
      await session`select count(*) from samples`;
      await session`update teams set name = name where id = ${team.id}`; // holds a row lock on the team

      const started = Date.now();
      const list = await api.get("/v1/pipelines/list");
      expect(list.status).toBe(200);
      const added = await api.post(`/v1/pipelines/${pipeline.id}/add`, {
        messages: [{ role: "user", content: "still answering" }],
      });
      expect(added.status).toBe(200);
      const other = client((await makeTeam()).apiKey);
      expect((await other.post("/v1/pipelines/create", { name: "another team" })).status).toBe(200);
      const samples = await api.post(`/v1/pipelines/${pipeline.id}/samples`, {});
      expect(samples.json.map((s: { id: string }) => s.id)).toEqual([added.json.id]);
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      await session`rollback`.catch(() => {});
      session.release();
      await idle.end({ timeout: 1 });
    }
  });
});
