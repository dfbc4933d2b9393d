import { describe, expect, it } from "vitest";
import { z } from "zod";
import { PipelineSchema } from "@/lib/contracts/pipelines";
import { client, makeTeam } from "../helpers/context";

describe("pipelines", () => {
  it("creates, gets and lists pipelines in the spec's shape", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    const created = await api.post("/v1/pipelines/create", { name: "support chats" });
    expect(created.status).toBe(200);
    const pipeline = PipelineSchema.strict().parse(created.json);
    expect(pipeline.id).toMatch(/^pipe_[a-z0-9]{20}$/);
    expect(pipeline).toMatchObject({ name: "support chats", teamId: team.id });
    expect(pipeline.createdAt).toMatch(/Z$/);

    const got = await api.get(`/v1/pipelines/${pipeline.id}`);
    expect(got.status).toBe(200);
    expect(PipelineSchema.strict().parse(got.json)).toEqual(pipeline);

    const second = (await api.post("/v1/pipelines/create", { name: "second" })).json;
    const list = await api.get("/v1/pipelines/list");
    expect(list.status).toBe(200);
    const items = z.array(PipelineSchema.strict()).parse(list.json);
    expect(items.map((p) => p.id)).toEqual([second.id, pipeline.id]); // newest first
  });

  it("moves updatedAt forward when samples are added", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    const p = (await api.post("/v1/pipelines/create", { name: "x" })).json;
    expect(p.updatedAt).toBe(p.createdAt);
    await new Promise((r) => setTimeout(r, 20));
    await api.post(`/v1/pipelines/${p.id}/add`, { messages: [{ role: "user", content: "hi" }] });
    const after = (await api.get(`/v1/pipelines/${p.id}`)).json;
    expect(Date.parse(after.updatedAt)).toBeGreaterThan(Date.parse(p.updatedAt));
  });

  it("validates create", async () => {
    const api = client((await makeTeam()).apiKey);
    const cases: [unknown, string | undefined][] = [
      [{}, "name"],
      [{ name: 3 }, "name"],
      [{ name: "   " }, "name"],
      [{ name: "a".repeat(201) }, "name"],
      [{ name: "ok", extra: 1 }, "extra"],
      [[1, 2], undefined],
    ];
    for (const [body, param] of cases) {
      const res = await api.post("/v1/pipelines/create", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error.type).toBe("invalid_request");
      if (param) expect(res.json.error.param).toBe(param);
    }
    const invalidJson = await api.post("/v1/pipelines/create", "{not json");
    expect(invalidJson.status).toBe(400);
    expect(invalidJson.json.error.message).toMatch(/not valid JSON/);
    expect((await api.get("/v1/pipelines/list")).json).toEqual([]); // nothing was written
  });

  it("never shows another team's pipeline, not even that it exists", async () => {
    const a = await makeTeam();
    const b = await makeTeam();
    const p = (await client(a.apiKey).post("/v1/pipelines/create", { name: "secret" })).json;
    const other = client(b.apiKey);
    const missing = await other.get("/v1/pipelines/pipe_doesnotexist0000000");
    const foreign = await other.get(`/v1/pipelines/${p.id}`);
    expect(foreign.status).toBe(404);
    expect(foreign.json.error.type).toBe("not_found");
    expect(missing.status).toBe(404);
    expect(foreign.json.error.message.replace(p.id, "X")).toBe(
      missing.json.error.message.replace("pipe_doesnotexist0000000", "X"),
    );
    for (const [path, body] of [
      ["add", { messages: [{ role: "user", content: "x" }] }],
      ["samples", {}],
      ["count", {}],
    ] as const) {
      const res = await other.post(`/v1/pipelines/${p.id}/${path}`, body);
      expect(res.status, path).toBe(404);
    }
    expect((await other.get("/v1/pipelines/list")).json).toEqual([]);
    expect((await client(a.apiKey).post(`/v1/pipelines/${p.id}/count`, {})).json).toEqual({ count: 0 });
  });
});
