import { createHash } from "node:crypto";
import { eq, inArray, sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { DownloadResponse } from "@/lib/contracts/datasets";
import { datasets, samples } from "@/lib/db/schema";
import { createDataset } from "@/lib/services/datasets";
import { client, db, makeTeam, type TestTeam } from "../helpers/context";
import { Dataset, download, parseLines, waitForStatus } from "../helpers/datasets";

// Datasets through the API against the built app and the suite's worker (which packages every
// PROCESSING dataset of the database into the local blob store).

type Api = ReturnType<typeof client>;

async function newPipeline(api: Api): Promise<string> {
  return (await api.post("/v1/pipelines/create", { name: "p" })).json.id;
}

/** Twelve labelled samples; returns their ids in the order they were added. */
async function seed(api: Api, pipelineId: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < 12; i++) {
    const res = await api.post(`/v1/pipelines/${pipelineId}/add`, {
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: `question ${i} "quoted" \\ back\nslash é 🚀` },
        { role: "assistant", content: `answer ${i}` },
      ],
      userId: `u${i % 3}`,
      groupId: i % 2 ? "odd" : "even",
      metadata: { lang: i % 4 === 0 ? "fr" : "en", ...(i % 3 === 0 ? { tier: "gold" } : {}) },
    });
    expect(res.status).toBe(200);
    ids.push(res.json.id);
  }
  return ids;
}

/** What the file must hold: the messages of the samples `/samples` lists for the same filter. */
async function expectedLines(api: Api, pipelineId: string, filter: object): Promise<unknown[]> {
  const listed = (await api.post(`/v1/pipelines/${pipelineId}/samples`, filter)).json as { id: string }[];
  const ids = listed.map((s) => s.id);
  const rows =
    ids.length === 0
      ? []
      : await db()
          .db.select({ id: samples.id, messages: samples.messages })
          .from(samples)
          .where(inArray(samples.id, ids));
  const byId = new Map(rows.map((r) => [r.id, r.messages]));
  return ids.map((id) => ({ messages: byId.get(id) }));
}

/** A dataset no worker can claim (its lease is held by nobody for an hour): it stays PROCESSING. */
async function heldDataset(team: TestTeam, pipelineId: string, name: string): Promise<string> {
  return db().db.transaction(async (tx) => {
    const d = await createDataset(tx, { teamId: team.id, pipelineId, name, selection: {} });
    await tx
      .update(datasets)
      .set({ leaseOwner: "test-hold", leaseExpiresAt: sql`now() + interval '1 hour'` })
      .where(eq(datasets.id, d.id));
    return d.id;
  });
}

describe("creating a dataset", () => {
  it("returns the spec's dataset object, PROCESSING, with the selection's size", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    const pipelineId = await newPipeline(api);
    await seed(api, pipelineId);
    const res = await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, { name: "all-samples" });
    expect(res.status).toBe(200);
    const d = Dataset.parse(res.json);
    expect(d).toMatchObject({
      name: "all-samples",
      teamId: team.id,
      datasetString: `${team.slug}/all-samples`,
      size: 12,
      status: "PROCESSING",
      deletedAt: null,
      pipelineId,
    });
    expect(d.id).toMatch(/^data_[0-9a-z]{20}$/);
    expect(Date.now() - new Date(d.createdAt).getTime()).toBeLessThan(60_000);
  });

  it("takes the filters at the top level or under `filter`, and sizes each like count", async () => {
    const api = client((await makeTeam()).apiKey);
    const pipelineId = await newPipeline(api);
    await seed(api, pipelineId);
    const filters = [
      {},
      { userId: "u1" },
      { groupId: "odd" },
      { metadata: { lang: "en" } },
      { metadata: { lang: "en", tier: "gold" } },
      { userId: "u0", metadata: { tier: "gold" } },
      { limit: 5, offset: 2 },
      { groupId: "even", offset: 4 },
      { metadata: { lang: "de" } },
    ];
    for (const [i, filter] of filters.entries()) {
      const count = (await api.post(`/v1/pipelines/${pipelineId}/count`, filter)).json.count;
      const top = await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, { name: `top-${i}`, ...filter });
      const nested = await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, { name: `nested-${i}`, filter });
      expect([top.status, nested.status], JSON.stringify(filter)).toEqual([200, 200]);
      expect(top.json.size, JSON.stringify(filter)).toBe(count);
      expect(nested.json.size, JSON.stringify(filter)).toBe(count);
      expect(top.json.filter).toEqual(filter);
      expect(nested.json.filter).toEqual(filter);
    }
    expect(
      (await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, { name: "null-filter", filter: null })).json.size,
    ).toBe(12);
  });

  it("rejects bad input with the offending param and creates nothing", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    const pipelineId = await newPipeline(api);
    const cases: [unknown, string | undefined][] = [
      [{}, "name"],
      [{ name: "" }, "name"],
      [{ name: 5 }, "name"],
      [{ name: "Upper" }, "name"],
      [{ name: "has space" }, "name"],
      [{ name: "-leading" }, "name"],
      [{ name: "a/b" }, "name"],
      [{ name: "a".repeat(101) }, "name"],
      [{ name: "x", userid: "u" }, "userid"],
      [{ name: "x", filter: { userid: "u" } }, "filter.userid"],
      [{ name: "x", filter: { name: "y" } }, "filter.name"],
      [{ name: "x", userId: "u", filter: { groupId: "g" } }, "userId"],
      [{ name: "x", limit: 0 }, "limit"],
      [{ name: "x", filter: { offset: -1 } }, "filter.offset"],
      [{ name: "x", metadata: { lang: 1 } }, "metadata.lang"],
      [{ name: "x", filter: "userId=u" }, "filter"],
      ["{not json", undefined],
    ];
    for (const [body, param] of cases) {
      const res = await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error.type).toBe("invalid_request");
      if (param) expect(res.json.error.param, JSON.stringify(body)).toBe(param);
    }
    expect((await api.get("/v1/datasets/list")).json).toEqual([]);
    expect((await client().post(`/v1/pipelines/${pipelineId}/create-dataset`, { name: "x" })).status).toBe(401);
    const accepted = await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, { name: "a.b_c-9" + "z".repeat(93) });
    expect(accepted.status).toBe(200);
  });

  it("answers 404 for an unknown or another team's pipeline, 409 for a name in use", async () => {
    const api = client((await makeTeam()).apiKey);
    const other = client((await makeTeam()).apiKey);
    const pipelineId = await newPipeline(api);
    const unknown = await api.post(`/v1/pipelines/pipe_${"0".repeat(20)}/create-dataset`, { name: "x" });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.type).toBe("not_found");
    const foreign = await other.post(`/v1/pipelines/${pipelineId}/create-dataset`, { name: "x" });
    expect(foreign.status).toBe(404);
    expect(foreign.json.error.message).toBe(unknown.json.error.message.replace(`pipe_${"0".repeat(20)}`, pipelineId));
    expect((await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, { name: "x" })).status).toBe(200);
    const again = await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, { name: "x", userId: "u" });
    expect(again.status).toBe(409);
    expect(again.json.error).toMatchObject({ type: "conflict", param: "name" });
    // Names are per team: another team may use the same one.
    const otherPipeline = await newPipeline(other);
    expect((await other.post(`/v1/pipelines/${otherPipeline}/create-dataset`, { name: "x" })).status).toBe(200);
    expect((await api.get("/v1/datasets/list")).json).toHaveLength(1);
  });
});

describe("packaging", () => {
  it("moves PROCESSING → READY and writes one {messages} line per selected sample, in order", async () => {
    const api = client((await makeTeam()).apiKey);
    const pipelineId = await newPipeline(api);
    await seed(api, pipelineId);
    const filters = [{}, { userId: "u2" }, { metadata: { lang: "en", tier: "gold" } }, { limit: 4, offset: 7 }];
    const created = [];
    for (const [i, filter] of filters.entries()) {
      const res = await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, { name: `f${i}`, filter });
      created.push({ id: Dataset.parse(res.json).id, filter });
    }
    for (const { id, filter } of created) {
      const ready = await waitForStatus(api, id, "READY");
      const text = await download(api, id);
      const expected = await expectedLines(api, pipelineId, filter);
      expect(ready.size).toBe(expected.length);
      expect(ready.progress).toBe(expected.length);
      expect(parseLines(text), JSON.stringify(filter)).toEqual(expected);
      expect(ready.bytes).toBe(Buffer.byteLength(text));
      expect(ready.checksum).toBe(`sha256:${createHash("sha256").update(text).digest("hex")}`);
      expect(ready.error).toBeNull();
    }
  });

  it("packages an empty selection as an empty file", async () => {
    const api = client((await makeTeam()).apiKey);
    const pipelineId = await newPipeline(api);
    const d = Dataset.parse((await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, { name: "empty" })).json);
    expect(d.size).toBe(0);
    const ready = await waitForStatus(api, d.id, "READY");
    expect(ready.bytes).toBe(0);
    expect(await download(api, d.id)).toBe("");
  });

  it("freezes the selection at creation: samples added afterwards never appear", async () => {
    const api = client((await makeTeam()).apiKey);
    const pipelineId = await newPipeline(api);
    const before = await seed(api, pipelineId);
    const add = (i: number) =>
      api.post(`/v1/pipelines/${pipelineId}/add`, { messages: [{ role: "user", content: `late ${i}` }] });
    // Adds racing the creation itself: each lands wholly before the bound (and in the file) or after it.
    const racing = Array.from({ length: 10 }, (_, i) => add(i));
    const res = await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, { name: "frozen" });
    const d = Dataset.parse(res.json);
    await Promise.all(racing);
    for (let i = 10; i < 20; i++) expect((await add(i)).status).toBe(200);
    const lines = parseLines(await download(api, (await waitForStatus(api, d.id, "READY")).id));
    expect(lines).toHaveLength(d.size);
    expect(d.size).toBeGreaterThanOrEqual(before.length);
    // The file is exactly the first `size` samples of the pipeline, in order.
    const all = await expectedLines(api, pipelineId, {});
    expect(all).toHaveLength(32);
    expect(lines).toEqual(all.slice(0, d.size));
    expect(JSON.stringify(lines)).not.toMatch(/late 1\d/); // added after create-dataset answered
  });

  it("shows FAILED with a readable reason once a dataset's packaging was interrupted too often", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    const pipelineId = await newPipeline(api);
    const id = await heldDataset(team, pipelineId, "doomed");
    // As if three workers had claimed it and died: the next claim gives up (DATASET_MAX_ATTEMPTS = 3).
    await db()
      .db.update(datasets)
      .set({ attempts: 3, leaseOwner: "dead-worker", leaseExpiresAt: sql`now() - interval '1 second'` })
      .where(eq(datasets.id, id));
    const failed = await waitForStatus(api, id, "FAILED");
    expect(failed.error).toBe("Packaging was interrupted 3 times; giving up.");
    expect(failed.bytes).toBeNull();
    const res = await api.get(`/v1/datasets/${id}/download`);
    expect(res.status).toBe(409);
    expect(res.json.error.type).toBe("conflict");
    expect(res.json.error.message).toContain("FAILED");
  });
});

describe("list, get, download and delete", () => {
  it("answers 409 on download while PROCESSING, and shows it in the list", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    const pipelineId = await newPipeline(api);
    const id = await heldDataset(team, pipelineId, "pending");
    const res = await api.get(`/v1/datasets/${id}/download`);
    expect(res.status).toBe(409);
    expect(res.json.error).toMatchObject({ type: "conflict" });
    expect(res.json.error.message).toContain("PROCESSING");
    const list = z.array(Dataset).parse((await api.get("/v1/datasets/list")).json);
    expect(list.map((d) => [d.id, d.status])).toEqual([[id, "PROCESSING"]]);
  });

  it("lists newest first, keeps teams apart, and deletes: 404 afterwards, file gone, name free", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    const other = client((await makeTeam()).apiKey);
    const pipelineId = await newPipeline(api);
    await seed(api, pipelineId);
    const first = Dataset.parse((await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, { name: "one" })).json);
    const second = Dataset.parse(
      (await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, { name: "two", limit: 1 })).json,
    );
    await waitForStatus(api, first.id, "READY");
    expect((await api.get("/v1/datasets/list")).json.map((d: { id: string }) => d.id)).toEqual([second.id, first.id]);
    expect((await other.get("/v1/datasets/list")).json).toEqual([]);
    for (const path of [`/v1/datasets/${first.id}`, `/v1/datasets/${first.id}/download`]) {
      expect((await other.get(path)).status, path).toBe(404);
    }
    expect((await other.call("DELETE", `/v1/datasets/${first.id}`)).status).toBe(404);
    expect((await client().get(`/v1/datasets/${first.id}`)).status).toBe(401);

    const url = DownloadResponse.parse((await api.get(`/v1/datasets/${first.id}/download`)).json).url;
    const whole = await fetch(url);
    expect(whole.status).toBe(200);
    expect(whole.headers.get("accept-ranges")).toBe("bytes");
    const bytes = Buffer.from(await whole.arrayBuffer());
    expect(bytes.length).toBeGreaterThan(20);
    // One range of it (a resumed download; a Parquet reader's footer): before, the whole file.
    const part = async (range: string) => {
      const res = await fetch(url, { headers: { range } });
      return { res, body: Buffer.from(await res.arrayBuffer()) };
    };
    for (const [range, from, to] of [
      ["bytes=5-14", 5, 15],
      ["bytes=10-", 10, bytes.length],
      ["bytes=-7", bytes.length - 7, bytes.length],
      [`bytes=3-${bytes.length + 100}`, 3, bytes.length],
    ] as const) {
      const { res, body } = await part(range);
      expect(res.status, range).toBe(206);
      expect(res.headers.get("content-range"), range).toBe(`bytes ${from}-${to - 1}/${bytes.length}`);
      expect(body.equals(bytes.subarray(from, to)), range).toBe(true);
    }
    const past = await part(`bytes=${bytes.length}-`);
    expect(past.res.status).toBe(416);
    expect(past.res.headers.get("content-range")).toBe(`bytes */${bytes.length}`);
    expect(JSON.parse(past.body.toString()).error).toMatchObject({ type: "invalid_request", param: "Range" });
    const several = await part("bytes=0-1,4-5");
    expect(several.res.status).toBe(200);
    expect(several.body.equals(bytes)).toBe(true);
    const deleted = await api.call("DELETE", `/v1/datasets/${first.id}`);
    expect(deleted.status).toBe(200);
    expect(Dataset.parse(deleted.json).deletedAt).not.toBeNull();
    expect((await api.get(`/v1/datasets/${first.id}`)).status).toBe(404);
    expect((await api.get(`/v1/datasets/${first.id}/download`)).status).toBe(404);
    expect((await api.call("DELETE", `/v1/datasets/${first.id}`)).status).toBe(404);
    expect((await api.get("/v1/datasets/list")).json.map((d: { id: string }) => d.id)).toEqual([second.id]);
    expect((await fetch(url)).status).toBe(404); // the file is removed
    const reused = await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, { name: "one" });
    expect(reused.status).toBe(200);
    expect(reused.json.id).not.toBe(first.id);
  });

  it("refuses a tampered or expired signed file URL", async () => {
    const api = client((await makeTeam()).apiKey);
    const pipelineId = await newPipeline(api);
    await seed(api, pipelineId);
    const d = Dataset.parse((await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, { name: "signed" })).json);
    await waitForStatus(api, d.id, "READY");
    const url = new URL(DownloadResponse.parse((await api.get(`/v1/datasets/${d.id}/download`)).json).url);
    const tampered = new URL(url);
    tampered.searchParams.set("expires", String(Number(url.searchParams.get("expires")) + 60));
    const unsigned = new URL(url);
    unsigned.search = "";
    for (const bad of [tampered, unsigned]) {
      const res = await fetch(bad);
      expect(res.status).toBe(403);
      expect(((await res.json()) as any).error.type).toBe("forbidden");
    }
  });
});
