import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { client, makeTeam } from "../helpers/context";
import { expectDocumented } from "../helpers/openapi";

const msg = (content: string) => [{ role: "user", content }];
const key = () => ({ "idempotency-key": randomUUID() });

async function setup() {
  const team = await makeTeam();
  const api = client(team.apiKey);
  const pipeline = (await api.post("/v1/pipelines/create", { name: "idem" })).json.id as string;
  return { team, api, pipeline, count: async () => (await api.post(`/v1/pipelines/${pipeline}/count`, {})).json.count };
}

describe("Idempotency-Key", () => {
  it("replays the first response of add, add-batch, pipelines/create and create-dataset, writing nothing again", async () => {
    const { api, pipeline, count } = await setup();
    const calls: [string, unknown][] = [
      [`/v1/pipelines/${pipeline}/add`, { messages: msg("once") }],
      [`/v1/pipelines/${pipeline}/add-batch`, { samples: [{ messages: msg("a") }, { messages: [] }] }],
      ["/v1/pipelines/create", { name: "made once" }],
      [`/v1/pipelines/${pipeline}/create-dataset`, { name: "once" }],
    ];
    for (const [path, body] of calls) {
      const headers = key();
      const first = await api.post(path, body, headers);
      expect(first.status, path).toBe(200);
      expect(first.headers.get("idempotent-replayed")).toBeNull();
      // The same body with its keys in another order is the same request.
      const reordered = JSON.parse(JSON.stringify(body), (_k, v) =>
        v && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v,
      );
      const again = await api.post(path, reordered, headers);
      expect(again.status, path).toBe(200);
      expect(again.text, path).toBe(first.text);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(again.headers.get("x-request-id")).not.toBe(first.headers.get("x-request-id"));
    }
    expect(await count()).toBe(2); // one add, one valid item of the batch
    const pipelines = (await api.get("/v1/pipelines/list")).json as { name: string }[];
    expect(pipelines.filter((p) => p.name === "made once")).toHaveLength(1);
    expect(((await api.get("/v1/datasets/list")).json as unknown[]).length).toBe(1);
  });

  it("answers 422 for the same key with another body or on another route, and stores nothing", async () => {
    const { api, pipeline, count } = await setup();
    const headers = key();
    expect((await api.post(`/v1/pipelines/${pipeline}/add`, { messages: msg("first") }, headers)).status).toBe(200);
    const other = await api.post(`/v1/pipelines/${pipeline}/add`, { messages: msg("second") }, headers);
    expect(other.status).toBe(422);
    expect(other.json.error).toMatchObject({ type: "invalid_request", param: "Idempotency-Key" });
    await expectDocumented("POST", "/v1/pipelines/{id}/add", other);
    const elsewhere = await api.post("/v1/pipelines/create", { name: "x" }, headers);
    expect(elsewhere.status).toBe(422);
    expect(await count()).toBe(1);
  });

  it("makes concurrent requests with one key write once, and all get the same answer", async () => {
    const { api, pipeline, count } = await setup();
    const headers = key();
    const body = { samples: Array.from({ length: 50 }, (_, i) => ({ messages: msg(`c${i}`) })) };
    const results = await Promise.all(
      Array.from({ length: 12 }, () => api.post(`/v1/pipelines/${pipeline}/add-batch`, body, headers)),
    );
    expect(results.map((r) => r.status)).toEqual(Array(12).fill(200));
    expect(new Set(results.map((r) => r.text)).size).toBe(1);
    expect(results.filter((r) => r.headers.get("idempotent-replayed") === null)).toHaveLength(1);
    expect(await count()).toBe(50);
    const single = key();
    const adds = await Promise.all(
      Array.from({ length: 12 }, () => api.post(`/v1/pipelines/${pipeline}/add`, { messages: msg("x") }, single)),
    );
    expect(new Set(adds.map((r) => r.json.id)).size).toBe(1);
    expect(await count()).toBe(51);
  });

  it("keeps keys per team, refuses a malformed key, and lets a failed request's key be used again", async () => {
    const a = await setup();
    const b = await setup();
    const headers = key();
    const fromA = await a.api.post(`/v1/pipelines/${a.pipeline}/add`, { messages: msg("same") }, headers);
    const fromB = await b.api.post(`/v1/pipelines/${b.pipeline}/add`, { messages: msg("same") }, headers);
    expect([fromA.status, fromB.status]).toEqual([200, 200]);
    expect(fromB.json.id).not.toBe(fromA.json.id);
    expect(fromB.headers.get("idempotent-replayed")).toBeNull();

    for (const bad of ["", "x".repeat(256), "caf\u00e9"]) {
      const res = await a.api.post(
        `/v1/pipelines/${a.pipeline}/add`,
        { messages: msg("k") },
        { "idempotency-key": bad },
      );
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.json.error.param).toBe("Idempotency-Key");
    }
    // A request that fails stores nothing: the same key with the same body runs again.
    const retry = key();
    const name = `taken-${Date.now()}`;
    expect((await a.api.post(`/v1/pipelines/${a.pipeline}/create-dataset`, { name })).status).toBe(200);
    const failed = await a.api.post(`/v1/pipelines/${a.pipeline}/create-dataset`, { name }, retry);
    expect(failed.status).toBe(409);
    const dataset = (await a.api.get("/v1/datasets/list")).json[0] as { id: string };
    expect((await a.api.call("DELETE", `/v1/datasets/${dataset.id}`)).status).toBe(200);
    const succeeded = await a.api.post(`/v1/pipelines/${a.pipeline}/create-dataset`, { name }, retry);
    expect(succeeded.status).toBe(200);
    expect(succeeded.headers.get("idempotent-replayed")).toBeNull();
    expect(await a.count()).toBe(1);
    expect(await b.count()).toBe(1);
  });
});
