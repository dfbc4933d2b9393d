import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { SampleSchema } from "@/lib/contracts/pipelines";
import { addSamplesDirect } from "../helpers/bulk";
import { baseUrl, client, makeTeam } from "../helpers/context";

const msg = (content: string) => [
  { role: "system", content: "be nice" },
  { role: "user", content },
];

type Api = ReturnType<typeof client>;

async function newPipeline(api: Api): Promise<string> {
  return (await api.post("/v1/pipelines/create", { name: "p" })).json.id;
}

describe("adding samples", () => {
  it("stores a sample and lists it with nulls for absent labels", async () => {
    const api = client((await makeTeam()).apiKey);
    const id = await newPipeline(api);
    const added = await api.post(`/v1/pipelines/${id}/add`, { messages: msg("hello") });
    expect(added.status).toBe(200);
    expect(Object.keys(added.json)).toEqual(["id"]);
    const list = await api.post(`/v1/pipelines/${id}/samples`, {});
    const [sample] = z.array(SampleSchema.strict()).parse(list.json);
    expect(sample).toMatchObject({
      id: added.json.id,
      length: 2,
      pipelineId: id,
      userId: null,
      groupId: null,
      metadata: null,
    });
  });

  it("stores every one of many concurrent adds once, and refuses only those aimed at another team's pipeline", async () => {
    const api = client((await makeTeam()).apiKey);
    const other = client((await makeTeam()).apiKey);
    const [mine, theirs] = [await newPipeline(api), await newPipeline(other)];
    const targets = Array.from({ length: 80 }, (_, i) => (i % 5 === 4 ? theirs : mine));
    const results = await Promise.all(
      targets.map((pipeline, i) =>
        api.post(`/v1/pipelines/${pipeline}/add`, {
          messages: msg(`concurrent ${i}`),
          userId: `u${i}`,
          metadata: { i: String(i), parity: i % 2 ? "odd" : "even" },
        }),
      ),
    );
    results.forEach((res, i) => expect(res.status, `add ${i}`).toBe(targets[i] === mine ? 200 : 404));
    const added = results.filter((r) => r.status === 200).map((r) => r.json.id as string);
    expect(new Set(added).size).toBe(64);
    const list = (await api.post(`/v1/pipelines/${mine}/samples`, {})).json as { id: string; userId: string }[];
    expect(list.map((s) => s.id).sort()).toEqual([...added].sort());
    // Each row kept its own labels: user i has metadata {i}, found through the labels table.
    for (const i of [0, 13, 78]) {
      const found = (await api.post(`/v1/pipelines/${mine}/samples`, { metadata: { i: String(i) } })).json;
      expect(found.map((s: { userId: string }) => s.userId)).toEqual([`u${i}`]);
    }
    expect((await api.post(`/v1/pipelines/${mine}/count`, { metadata: { parity: "odd" } })).json).toEqual({
      count: 32,
    });
    expect((await other.post(`/v1/pipelines/${theirs}/count`, {})).json).toEqual({ count: 0 });
  });

  it("rejects bad input with the offending param and writes nothing", async () => {
    const api = client((await makeTeam()).apiKey);
    const id = await newPipeline(api);
    const cases: [unknown, string][] = [
      [{}, "messages"],
      [{ messages: [] }, "messages"],
      [{ messages: "hi" }, "messages"],
      [{ messages: [{ role: "robot", content: "x" }] }, "messages[0].role"],
      [{ messages: [{ role: "user", content: 5 }] }, "messages[0].content"],
      [{ messages: [{ role: "user" }] }, "messages[0].content"],
      [{ messages: [{ role: "user", content: "x", extra: "n" }] }, "messages[0].extra"],
      [{ messages: msg("x"), metadata: { a: 1 } }, "metadata.a"],
      [{ messages: msg("x"), metadata: ["a"] }, "metadata"],
      [{ messages: msg("x"), userId: 7 }, "userId"],
      [{ messages: msg("x"), groupId: "" }, "groupId"],
      [{ messages: msg("x"), userid: "u" }, "userid"],
      // U+0000 cannot be stored by Postgres: a 400, not a database error.
      [{ messages: [{ role: "user", content: "a\u0000b" }] }, "messages[0].content"],
      [{ messages: msg("x"), userId: "u\u0000" }, "userId"],
      [{ messages: msg("x"), metadata: { lang: "e\u0000n" } }, "metadata.lang"],
      // Nor can jsonb hold an unpaired surrogate, though "\ud800" is valid JSON.
      [{ messages: [{ role: "user", content: "x\ud800y" }] }, "messages[0].content"],
      [{ messages: msg("x"), groupId: "\udc00" }, "groupId"],
      [{ messages: msg("x"), metadata: { ["k\ud83d"]: "v" } }, "metadata.k\ud83d"],
    ];
    for (const [body, param] of cases) {
      const res = await api.post(`/v1/pipelines/${id}/add`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error.type).toBe("invalid_request");
      if (param) expect(res.json.error.param, JSON.stringify(body)).toBe(param);
    }
    expect((await api.post(`/v1/pipelines/${id}/count`, {})).json).toEqual({ count: 0 });
  });

  it("never fails one team's concurrent adds because of another team's unstorable text", async () => {
    const a = client((await makeTeam()).apiKey);
    const b = client((await makeTeam()).apiKey);
    const [pa, pb] = await Promise.all([newPipeline(a), newPipeline(b)]);
    const results = await Promise.all(
      Array.from({ length: 72 }, (_, i) =>
        i % 2
          ? b.post(`/v1/pipelines/${pb}/add`, { messages: msg(`fine ${i}`) }).then((r) => ["b", r.status] as const)
          : a.post(`/v1/pipelines/${pa}/add`, { messages: msg(`x\ud800y ${i}`) }).then((r) => ["a", r.status] as const),
      ),
    );
    expect(results.filter(([who]) => who === "a").every(([, status]) => status === 400)).toBe(true);
    expect(results.filter(([who]) => who === "b").map(([, status]) => status)).toEqual(Array(36).fill(200));
    expect((await b.post(`/v1/pipelines/${pb}/count`, {})).json).toEqual({ count: 36 });
  });

  it("answers 413 for a body over the limit, even without Content-Length", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    const id = await newPipeline(api);
    const big = JSON.stringify({ messages: [{ role: "user", content: "x".repeat(1024 * 1024 + 10) }] });
    const res = await api.post(`/v1/pipelines/${id}/add`, big);
    expect(res.status).toBe(413);
    expect(res.json.error.type).toBe("payload_too_large");
    // A streamed (chunked) body has no Content-Length: the limit is enforced while reading.
    const chunked = await fetch(`${baseUrl}/v1/pipelines/${id}/add`, {
      method: "POST",
      headers: { authorization: `Bearer ${team.apiKey}`, "content-type": "application/json" },
      body: new ReadableStream({
        start(c) {
          const bytes = new TextEncoder().encode(big);
          for (let i = 0; i < bytes.length; i += 65536) c.enqueue(bytes.slice(i, i + 65536));
          c.close();
        },
      }),
      duplex: "half",
    } as RequestInit);
    expect(chunked.status).toBe(413);
    expect((await chunked.json()).error.type).toBe("payload_too_large");
    expect((await api.post(`/v1/pipelines/${id}/count`, {})).json).toEqual({ count: 0 });
  });

  it("answers another method with 405, the error body and Allow", async () => {
    const api = client((await makeTeam()).apiKey);
    const id = await newPipeline(api);
    const res = await api.get(`/v1/pipelines/${id}/add`);
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
    expect(res.json.error.type).toBe("invalid_request");
  });

  it("404s for an unknown pipeline", async () => {
    const api = client((await makeTeam()).apiKey);
    const res = await api.post("/v1/pipelines/pipe_nope/add", { messages: msg("x") });
    expect(res.status).toBe(404);
    expect(res.json.error).toMatchObject({ type: "not_found", param: "id" });
  });
});

describe("selections", () => {
  let api: Api;
  let pipelineId: string;
  // 12 samples: users u0..u2 round-robin, groups g0/g1 alternating, metadata lang + every third tier=gold
  const expected: { id: string; userId: string; groupId: string; metadata: Record<string, string> }[] = [];

  beforeAll(async () => {
    api = client((await makeTeam()).apiKey);
    pipelineId = await newPipeline(api);
    for (let i = 0; i < 12; i++) {
      const userId = `u${i % 3}`;
      const groupId = `g${i % 2}`;
      const metadata: Record<string, string> = { lang: i < 6 ? "en" : "fr", ...(i % 3 === 0 ? { tier: "gold" } : {}) };
      const res = await api.post(`/v1/pipelines/${pipelineId}/add`, {
        messages: msg(`sample ${i}`),
        userId,
        groupId,
        metadata,
      });
      expect(res.status).toBe(200);
      expected.push({ id: res.json.id, userId, groupId, metadata });
    }
  });

  const select = async (filter: Record<string, unknown>) => {
    const res = await api.post(`/v1/pipelines/${pipelineId}/samples`, filter);
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    return z.array(SampleSchema.strict()).parse(res.json);
  };
  const count = async (filter: Record<string, unknown>) => {
    const res = await api.post(`/v1/pipelines/${pipelineId}/count`, filter);
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    return res.json.count as number;
  };

  it("returns every sample, in insertion order, with no filters (and with no body)", async () => {
    expect((await select({})).map((s) => s.id)).toEqual(expected.map((e) => e.id));
    const noBody = await api.call("POST", `/v1/pipelines/${pipelineId}/samples`);
    expect(noBody.json.map((s: { id: string }) => s.id)).toEqual(expected.map((e) => e.id));
    expect(await count({})).toBe(12);
  });

  const filters: [string, Record<string, unknown>, (e: (typeof expected)[number]) => boolean][] = [
    ["userId", { userId: "u1" }, (e) => e.userId === "u1"],
    ["groupId", { groupId: "g0" }, (e) => e.groupId === "g0"],
    ["metadata one key", { metadata: { lang: "fr" } }, (e) => e.metadata.lang === "fr"],
    [
      "metadata two keys",
      { metadata: { lang: "en", tier: "gold" } },
      (e) => e.metadata.lang === "en" && e.metadata.tier === "gold",
    ],
    ["user + group", { userId: "u0", groupId: "g1" }, (e) => e.userId === "u0" && e.groupId === "g1"],
    [
      "all three",
      { userId: "u0", groupId: "g0", metadata: { tier: "gold" } },
      (e) => e.userId === "u0" && e.groupId === "g0" && e.metadata.tier === "gold",
    ],
    ["no match", { userId: "nobody" }, () => false],
    ["metadata value mismatch", { metadata: { lang: "de" } }, () => false],
    ["empty metadata = no filter", { metadata: {} }, () => true],
    ["nulls = no filter", { userId: null, groupId: null, metadata: null }, () => true],
  ];
  for (const [name, filter, predicate] of filters) {
    it(`filters by ${name}, and count agrees`, async () => {
      const want = expected.filter(predicate).map((e) => e.id);
      expect((await select(filter)).map((s) => s.id)).toEqual(want);
      expect(await count(filter)).toBe(want.length);
    });
  }

  it("pages with limit/offset without repeats or gaps, also when filtered", async () => {
    for (const filter of [{}, { metadata: { lang: "en" } }]) {
      const all = (await select(filter)).map((s) => s.id);
      for (const size of [1, 5, 7]) {
        const seen: string[] = [];
        for (let offset = 0; offset < all.length + size; offset += size) {
          const page = await select({ ...filter, limit: size, offset });
          expect(page.length).toBeLessThanOrEqual(size);
          expect(await count({ ...filter, limit: size, offset })).toBe(page.length);
          seen.push(...page.map((s) => s.id));
        }
        expect(seen).toEqual(all);
      }
    }
    expect(await select({ limit: 3 })).toHaveLength(3);
    expect((await select({ offset: 10 })).map((s) => s.id)).toEqual(expected.slice(10).map((e) => e.id));
  });

  it("count accepts metadata as a JSON-encoded string", async () => {
    expect(await count({ metadata: JSON.stringify({ lang: "fr" }) })).toBe(6);
    const bad = await api.post(`/v1/pipelines/${pipelineId}/count`, { metadata: "{oops" });
    expect(bad.status).toBe(400);
    expect(bad.json.error.param).toBe("metadata");
  });

  it("rejects bad filters with the offending param", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ limit: 0 }, "limit"],
      [{ limit: 1.5 }, "limit"],
      [{ limit: "10" }, "limit"],
      [{ offset: -1 }, "offset"],
      [{ userId: 5 }, "userId"],
      [{ metadata: { a: 1 } }, "metadata.a"],
      [{ metadata: "x" }, "metadata"],
      [{ user_id: "u1" }, "user_id"],
    ];
    for (const [body, param] of cases) {
      for (const op of ["samples", "count"]) {
        const res = await api.post(`/v1/pipelines/${pipelineId}/${op}`, body);
        expect(res.status, `${op} ${JSON.stringify(body)}`).toBe(400);
        if (param) expect(res.json.error.param).toBe(param);
      }
    }
  });

  it("gives each sample an absolute signed URL that returns its messages", async () => {
    const [first] = await select({ limit: 1 });
    expect(first!.url.startsWith("http://127.0.0.1:")).toBe(true);
    const res = await fetch(first!.url);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(msg("sample 0"));
  });
});

describe("large selections", () => {
  it("streams every sample of a pipeline larger than one cursor batch, in order", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    const id = await newPipeline(api);
    const ids = await addSamplesDirect(team.id, id, 1234);
    const res = await fetch(`${baseUrl}/v1/pipelines/${id}/samples`, {
      method: "POST",
      headers: { authorization: `Bearer ${team.apiKey}` },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { id: string }[];
    expect(body.map((s) => s.id)).toEqual(ids);
  });
});
