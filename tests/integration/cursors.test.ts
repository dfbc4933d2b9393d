import { describe, expect, it } from "vitest";
import { samples } from "@/lib/db/schema";
import { newId } from "@/lib/ids";
import { client, db, makeTeam } from "../helpers/context";
import { expectDocumented } from "../helpers/openapi";

type Sample = { id: string; userId: string | null };

/** n samples with labels, some sharing a created_at (ties are ordered by id). */
async function pipelineOf(n: number) {
  const team = await makeTeam();
  const api = client(team.apiKey);
  const pipeline = (await api.post("/v1/pipelines/create", { name: "cursor" })).json.id as string;
  const base = Date.now() - n * 1000;
  const rows = Array.from({ length: n }, (_, i) => ({
    id: newId("sample"),
    pipelineId: pipeline,
    teamId: team.id,
    messages: [{ role: "user" as const, content: `m${i}` }],
    length: 1,
    userId: `u${i % 7}`,
    createdAt: new Date(base + Math.floor(i / 3)), // three samples per millisecond
  }));
  for (let i = 0; i < rows.length; i += 1000)
    await db()
      .db.insert(samples)
      .values(rows.slice(i, i + 1000));
  return { api, pipeline };
}

describe("cursor paging (after)", () => {
  it("pages through 10,000 samples exactly as offset paging does, with and without filters", async () => {
    const { api, pipeline } = await pipelineOf(10_000);
    for (const filter of [{}, { userId: "u3" }]) {
      const all = (await api.post(`/v1/pipelines/${pipeline}/samples`, filter)).json as Sample[];
      expect(all.length).toBe("userId" in filter ? 1429 : 10_000);
      const byCursor: string[] = [];
      const byOffset: string[] = [];
      const size = 500;
      for (let after: string | undefined; ;) {
        const res = await api.post(`/v1/pipelines/${pipeline}/samples`, { ...filter, limit: size, after });
        expect(res.status).toBe(200);
        const page = res.json as Sample[];
        byCursor.push(...page.map((s) => s.id));
        if (page.length < size) break;
        after = page[page.length - 1]!.id;
      }
      for (let offset = 0; ; offset += size) {
        const page = (await api.post(`/v1/pipelines/${pipeline}/samples`, { ...filter, limit: size, offset })).json;
        byOffset.push(...page.map((s: Sample) => s.id));
        if (page.length < size) break;
      }
      expect(byCursor).toEqual(all.map((s) => s.id));
      expect(byOffset).toEqual(byCursor);
    }
  }, 180_000);

  it("continues after a sample that does not match the filters, and counts what follows", async () => {
    const { api, pipeline } = await pipelineOf(100);
    const all = (await api.post(`/v1/pipelines/${pipeline}/samples`, {})).json as Sample[];
    const cursor = all[10]!; // userId u3
    const res = await api.post(`/v1/pipelines/${pipeline}/samples`, { after: cursor.id, userId: "u0", limit: 3 });
    await expectDocumented("POST", "/v1/pipelines/{id}/samples", res);
    const expected = all.slice(11).filter((s) => s.userId === "u0");
    expect(res.json.map((s: Sample) => s.id)).toEqual(expected.slice(0, 3).map((s) => s.id));
    const withOffset = await api.post(`/v1/pipelines/${pipeline}/samples`, { after: cursor.id, offset: 5, limit: 2 });
    expect(withOffset.json.map((s: Sample) => s.id)).toEqual(all.slice(16, 18).map((s) => s.id));
    const count = await api.post(`/v1/pipelines/${pipeline}/count`, { after: cursor.id, userId: "u0" });
    expect(count.json).toEqual({ count: expected.length });
    const last = await api.post(`/v1/pipelines/${pipeline}/samples`, { after: all[99]!.id });
    expect(last.json).toEqual([]);
  });

  it("counts after a cursor within a sample picked by one metadata condition, as it lists", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    const pipeline = (await api.post("/v1/pipelines/create", { name: "sampled" })).json.id as string;
    const items = Array.from({ length: 40 }, (_, i) => ({
      messages: [{ role: "user", content: `m${i}` }],
      metadata: { lang: i % 4 === 0 ? "fr" : "en" },
    }));
    expect((await api.post(`/v1/pipelines/${pipeline}/add-batch`, { samples: items })).status).toBe(200);
    const all = (await api.post(`/v1/pipelines/${pipeline}/samples`, {})).json as Sample[];
    const after = all[5]!.id;
    // One positive condition alone drives the scan from the labels: nothing else to filter on.
    for (const metadata of [
      { lang: "en" },
      { lang: { $in: ["en", "de"] } },
      { lang: { $prefix: "e" } },
      { lang: { $exists: true } },
    ]) {
      const body = { metadata, sample: { size: 12, seed: 3 }, after };
      const listed = await api.post(`/v1/pipelines/${pipeline}/samples`, body);
      expect(listed.status).toBe(200);
      const counted = await api.post(`/v1/pipelines/${pipeline}/count`, body);
      expect(counted.status).toBe(200);
      expect(counted.json.count).toBe((listed.json as Sample[]).length);
      expect(counted.json.count).toBeGreaterThan(0);
    }
  });

  it("refuses a cursor that is not a sample of this pipeline (another pipeline's, another team's, unknown)", async () => {
    const { api, pipeline } = await pipelineOf(5);
    const other = await pipelineOf(5);
    const foreign = (await other.api.post(`/v1/pipelines/${other.pipeline}/samples`, { limit: 1 })).json[0].id;
    for (const after of [foreign, "smp_00000000000000000000", ""]) {
      for (const op of ["samples", "count"]) {
        const res = await api.post(`/v1/pipelines/${pipeline}/${op}`, { after });
        expect(res.status, `${op} ${after}`).toBe(400);
        expect(res.json.error.param).toBe("after");
      }
    }
    const unknownMessage = (await api.post(`/v1/pipelines/${pipeline}/samples`, { after: "smp_00000000000000000000" }))
      .json.error.message as string;
    const foreignMessage = (await api.post(`/v1/pipelines/${pipeline}/samples`, { after: foreign })).json.error
      .message as string;
    expect(foreignMessage.replace(foreign, "X")).toBe(unknownMessage.replace("smp_00000000000000000000", "X"));
  });
});
