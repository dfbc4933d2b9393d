import { eq, sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { pipelines, samples } from "@/lib/db/schema";
import { newId } from "@/lib/ids";
import { client, db, makeTeam } from "../helpers/context";
import { download, parseLines, waitForStatus } from "../helpers/datasets";
import { expectDocumented } from "../helpers/openapi";

type Api = ReturnType<typeof client>;
const msg = (content: string) => [
  { role: "user", content },
  { role: "assistant", content: `re ${content}` },
];

async function setup() {
  const team = await makeTeam();
  const api = client(team.apiKey);
  const pipeline = (await api.post("/v1/pipelines/create", { name: "del" })).json.id as string;
  const add = async (content: string, extra: object = {}) =>
    (await api.post(`/v1/pipelines/${pipeline}/add`, { messages: msg(content), ...extra })).json.id as string;
  const count = async (body: object = {}) => (await api.post(`/v1/pipelines/${pipeline}/count`, body)).json.count;
  return { team, api, pipeline, add, count };
}

async function dataset(api: Api, pipeline: string, body: object) {
  const res = await api.post(`/v1/pipelines/${pipeline}/create-dataset`, body);
  expect(res.status, res.text).toBe(200);
  return waitForStatus(api, res.json.id, "READY");
}

const contentsOf = async (api: Api, id: string) =>
  (parseLines(await download(api, id)) as { messages: { content: string }[] }[]).map((l) => l.messages[0]!.content);

describe("deleting samples", () => {
  it("by id: its URL answers 404, later datasets leave it out, and datasets that hold it say so", async () => {
    const { api, pipeline, add, count } = await setup();
    const [a, , c] = [await add("a", { userId: "u1", metadata: { k: "v" } }), await add("b"), await add("c")];
    const url = (await api.post(`/v1/pipelines/${pipeline}/samples`, { limit: 1 })).json[0].url as string;
    expect((await fetch(url)).status).toBe(200);
    const all = await dataset(api, pipeline, { name: "all" });
    const others = await dataset(api, pipeline, { name: "others", userId: "nobody" });

    const res = await api.call("DELETE", `/v1/samples/${a}`);
    expect(res.json).toEqual({ deleted: 1 });
    await expectDocumented("DELETE", "/v1/samples/{id}", res);
    expect((await fetch(url)).status).toBe(404);
    expect(await count()).toBe(2);
    expect(await count({ metadata: { k: "v" } })).toBe(0);
    expect(await count({ metadata: { k: { $exists: true } } })).toBe(0);
    const again = await api.call("DELETE", `/v1/samples/${a}`);
    expect(again.status).toBe(404);
    await expectDocumented("DELETE", "/v1/samples/{id}", again);

    expect((await api.get(`/v1/datasets/${all.id}`)).json.containsDeletedSamples).toBe(true);
    expect((await api.get(`/v1/datasets/${others.id}`)).json.containsDeletedSamples).toBe(false);
    const later = await dataset(api, pipeline, { name: "later" });
    expect(later.containsDeletedSamples).toBe(false);
    expect(await contentsOf(api, later.id)).toEqual(["b", "c"]);
    expect(await contentsOf(api, all.id)).toEqual(["a", "b", "c"]); // built before: it says so
    expect((await api.call("DELETE", `/v1/samples/${c}`)).json).toEqual({ deleted: 1 });
    expect(await count()).toBe(1);
  });

  it("by selection: every match (in batches), at least one filter or all: true", async () => {
    const { api, pipeline, add, count } = await setup();
    for (let i = 0; i < 30; i++) await add(`s${i}`, { metadata: { lang: i % 3 ? "en" : "fr" }, userId: `u${i % 2}` });
    for (const [body, param] of [
      [{}, "all"],
      [{ all: false }, "all"],
      [{ metadata: {} }, "all"],
      [{ all: true, userId: "u0" }, "userId"],
      [{ limit: 5 }, "limit"],
    ] as const) {
      const res = await api.post(`/v1/pipelines/${pipeline}/delete-samples`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error.param).toBe(param);
    }
    const fr = await dataset(api, pipeline, { name: "fr", metadata: { lang: "fr" } });
    const en = await dataset(api, pipeline, { name: "en-u1", metadata: { lang: "en" }, userId: "u1" });
    const res = await api.post(`/v1/pipelines/${pipeline}/delete-samples`, { metadata: { lang: "fr" }, userId: "u0" });
    expect(res.json).toEqual({ deleted: 5 });
    await expectDocumented("POST", "/v1/pipelines/{id}/delete-samples", res);
    expect(await count()).toBe(25);
    expect(await count({ metadata: { lang: "fr" } })).toBe(5);
    expect((await api.get(`/v1/datasets/${fr.id}`)).json.containsDeletedSamples).toBe(true);
    expect((await api.get(`/v1/datasets/${en.id}`)).json.containsDeletedSamples).toBe(false);
    expect((await api.post(`/v1/pipelines/${pipeline}/delete-samples`, { search: "s1" })).json).toEqual({ deleted: 9 });
    expect((await api.post(`/v1/pipelines/${pipeline}/delete-samples`, { all: true })).json).toEqual({ deleted: 16 });
    expect(await count()).toBe(0);
    expect((await api.post(`/v1/pipelines/${pipeline}/delete-samples`, { all: true })).json).toEqual({ deleted: 0 });
  });

  it("a sample relabelled after a dataset took it, then deleted, marks that dataset (its labels then no longer match)", async () => {
    const { api, pipeline, add } = await setup();
    const x = await add("x", { metadata: { feedback: "good" } });
    await add("y", { metadata: { feedback: "good" } });
    const z = await add("z", { metadata: { feedback: "bad" } });
    const good = await dataset(api, pipeline, { name: "good", metadata: { feedback: "good" } });
    expect(await contentsOf(api, good.id)).toEqual(["x", "y"]);
    expect((await api.call("PATCH", `/v1/samples/${x}`, { metadata: { feedback: "bad" } })).status).toBe(200);
    // A deletion of samples the dataset never held leaves it alone.
    expect((await api.call("DELETE", `/v1/samples/${z}`)).json).toEqual({ deleted: 1 });
    expect((await api.get(`/v1/datasets/${good.id}`)).json.containsDeletedSamples).toBe(false);
    // x is in its file: deleting it marks it (before: false, its labels now say "bad").
    const res = await api.post(`/v1/pipelines/${pipeline}/delete-samples`, { metadata: { feedback: "bad" } });
    expect(res.json).toEqual({ deleted: 1 });
    expect((await api.get(`/v1/datasets/${good.id}`)).json.containsDeletedSamples).toBe(true);
  });

  it("with the pipeline: gone at once, its samples purged by a worker, its datasets kept and marked", async () => {
    const { api, pipeline, add } = await setup();
    for (let i = 0; i < 5; i++) await add(`p${i}`, { metadata: { i: String(i) } });
    const url = (await api.post(`/v1/pipelines/${pipeline}/samples`, { limit: 1 })).json[0].url as string;
    const kept = await dataset(api, pipeline, { name: "kept" });
    const res = await api.call("DELETE", `/v1/pipelines/${pipeline}`);
    expect(res.json).toEqual({ deleted: 1 });
    await expectDocumented("DELETE", "/v1/pipelines/{id}", res);
    expect((await api.get(`/v1/pipelines/${pipeline}`)).status).toBe(404);
    expect((await api.post(`/v1/pipelines/${pipeline}/add`, { messages: msg("late") })).status).toBe(404);
    expect((await api.post(`/v1/pipelines/${pipeline}/samples`, {})).status).toBe(404);
    expect((await api.get("/v1/pipelines/list")).json.map((p: { id: string }) => p.id)).not.toContain(pipeline);
    expect((await fetch(url)).status).toBe(404);
    expect((await api.call("DELETE", `/v1/pipelines/${pipeline}`)).status).toBe(404);
    const after = (await api.get(`/v1/datasets/${kept.id}`)).json;
    expect(after).toMatchObject({ status: "READY", containsDeletedSamples: true, pipelineId: pipeline });
    await expect
      .poll(async () => (await db().db.select().from(pipelines).where(eq(pipelines.id, pipeline))).length, {
        timeout: 20_000,
      })
      .toBe(0);
    expect((await db().db.select().from(samples).where(eq(samples.pipelineId, pipeline))).length).toBe(0);
    const labels = await db().db.execute(sql`select 1 from sample_labels where pipeline_id = ${pipeline}`);
    expect(labels.length).toBe(0);
    expect((await api.get(`/v1/datasets/${kept.id}/download`)).status).toBe(200);
  });

  it("by retention: PATCH sets retentionDays, a worker deletes older samples, the pipeline shows it", async () => {
    const { team, api, pipeline, add, count } = await setup();
    const day = 24 * 3600 * 1000;
    const old = Array.from({ length: 1500 }, (_, i) => ({
      id: newId("sample"),
      pipelineId: pipeline,
      teamId: team.id,
      messages: [{ role: "user" as const, content: `old ${i}` }],
      length: 1,
      metadata: { age: "old" },
      createdAt: new Date(Date.now() - 3 * day + i),
    }));
    for (let i = 0; i < old.length; i += 500)
      await db()
        .db.insert(samples)
        .values(old.slice(i, i + 500));
    await db().db.execute(sql`
      insert into sample_labels (pipeline_id, key, value, created_at, sample_id)
      select pipeline_id, 'age', 'old', created_at, id from samples where pipeline_id = ${pipeline}`);
    const fresh = [await add("fresh 1"), await add("fresh 2")];
    const before = await dataset(api, pipeline, { name: "before" });
    const recent = await dataset(api, pipeline, { name: "recent", metadata: { age: { $exists: false } } });

    for (const bad of [0, 36_501, 1.5, "7"]) {
      const res = await api.call("PATCH", `/v1/pipelines/${pipeline}`, { retentionDays: bad });
      expect(res.status, String(bad)).toBe(400);
      expect(res.json.error.param).toBe("retentionDays");
    }
    const patched = await api.call("PATCH", `/v1/pipelines/${pipeline}`, { retentionDays: 2, name: "kept two days" });
    expect(patched.json).toMatchObject({ id: pipeline, name: "kept two days", retentionDays: 2 });
    await expectDocumented("PATCH", "/v1/pipelines/{id}", patched);
    expect((await api.get(`/v1/pipelines/${pipeline}`)).json.retentionDays).toBe(2);
    await expect.poll(() => count(), { timeout: 30_000 }).toBe(2);
    const left = (await api.post(`/v1/pipelines/${pipeline}/samples`, {})).json.map((s: { id: string }) => s.id);
    expect(left).toEqual(fresh);
    expect(await count({ metadata: { age: "old" } })).toBe(0);
    expect((await api.get(`/v1/datasets/${before.id}`)).json.containsDeletedSamples).toBe(true);
    expect((await api.get(`/v1/datasets/${recent.id}`)).json.containsDeletedSamples).toBe(false);

    const cleared = await api.call("PATCH", `/v1/pipelines/${pipeline}`, { retentionDays: null });
    expect(cleared.json.retentionDays).toBeNull();
    expect(cleared.json.name).toBe("kept two days");
    expect((await api.call("PATCH", `/v1/pipelines/${pipeline}`, {})).json.retentionDays).toBeNull();
  });
});
