import { request } from "node:http";
import { gunzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { addSamplesDirect } from "../helpers/bulk";
import { holdUploads } from "../helpers/held-uploads";
import { baseUrl, client, makeTeam } from "../helpers/context";
import { expectDocumented } from "../helpers/openapi";

const msg = (content: string) => [
  { role: "user", content },
  { role: "assistant", content: `re: ${content}` },
];

async function setup() {
  const team = await makeTeam();
  const api = client(team.apiKey);
  const pipeline = (await api.post("/v1/pipelines/create", { name: "batch" })).json.id as string;
  return { team, api, pipeline };
}

describe("add-batch", () => {
  it("stores the valid items of a mixed batch and answers each in request order", async () => {
    const { api, pipeline } = await setup();
    const samples = [
      { messages: msg("one"), userId: "u1", metadata: { lang: "en" } },
      { messages: [{ role: "robot", content: "x" }] },
      { messages: msg("two"), groupId: "g" },
      { messages: [] },
      { messages: msg("nul\u0000") },
      { messages: msg("three"), metadata: { lang: 5 } },
      "not an object",
      { messages: msg("four"), unknown: true },
      { messages: msg("five") },
    ];
    const res = await api.post(`/v1/pipelines/${pipeline}/add-batch`, { samples });
    expect(res.status).toBe(200);
    await expectDocumented("POST", "/v1/pipelines/{id}/add-batch", res);
    const results = res.json.results as ({ id: string } | { error: { type: string; param?: string } })[];
    expect(results).toHaveLength(samples.length);
    const params = results.map((r) => ("error" in r ? r.error.param : "ok"));
    expect(params).toEqual([
      "ok",
      "samples[1].messages[0].role",
      "ok",
      "samples[3].messages",
      "samples[4].messages[0].content",
      "samples[5].metadata.lang",
      "samples[6]",
      "samples[7].unknown",
      "ok",
    ]);
    for (const r of results) if ("error" in r) expect(r.error.type).toBe("invalid_request");
    const ids = results.flatMap((r) => ("id" in r ? [r.id] : []));
    // Stored in request order (the order of selections), with their labels.
    const listed = (await api.post(`/v1/pipelines/${pipeline}/samples`, {})).json as { id: string; userId: string }[];
    expect(listed.map((s) => s.id)).toEqual(ids);
    expect((await api.post(`/v1/pipelines/${pipeline}/count`, { metadata: { lang: "en" } })).json).toEqual({
      count: 1,
    });
    expect((await api.post(`/v1/pipelines/${pipeline}/count`, { groupId: "g" })).json).toEqual({ count: 1 });
  });

  it("takes 1,000 samples in one request, not 1,001", async () => {
    const { api, pipeline } = await setup();
    const samples = Array.from({ length: 1000 }, (_, i) => ({ messages: msg(`s${i}`), metadata: { i: String(i) } }));
    const res = await api.post(`/v1/pipelines/${pipeline}/add-batch`, { samples });
    expect(res.status).toBe(200);
    expect(res.json.results.every((r: { id?: string }) => r.id?.startsWith("smp_"))).toBe(true);
    expect((await api.post(`/v1/pipelines/${pipeline}/count`, {})).json).toEqual({ count: 1000 });
    expect((await api.post(`/v1/pipelines/${pipeline}/count`, { metadata: { i: "999" } })).json).toEqual({ count: 1 });
    // Four statements of at most 256 rows, yet the selection lists them in request order.
    const listed = (await api.post(`/v1/pipelines/${pipeline}/samples`, { limit: 1000 })).json as {
      metadata: { i: string };
    }[];
    expect(listed.map((s) => Number(s.metadata.i))).toEqual(samples.map((_, i) => i));
    const over = await api.post(`/v1/pipelines/${pipeline}/add-batch`, { samples: [...samples, samples[0]] });
    expect(over.status).toBe(400);
    expect(over.json.error.param).toBe("samples");
    expect((await api.post(`/v1/pipelines/${pipeline}/count`, {})).json).toEqual({ count: 1000 });
  });

  it("refuses a bad envelope, an unknown or another team's pipeline, and an item over the add limit", async () => {
    const { api, pipeline } = await setup();
    const other = await setup();
    for (const [body, param] of [
      [{}, "samples"],
      [{ samples: [] }, "samples"],
      [{ samples: "x" }, "samples"],
      [{ samples: [{ messages: msg("x") }], extra: 1 }, "extra"],
    ] as const) {
      const res = await api.post(`/v1/pipelines/${pipeline}/add-batch`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error.param).toBe(param);
    }
    const foreign = await api.post(`/v1/pipelines/${other.pipeline}/add-batch`, { samples: [{ messages: msg("x") }] });
    expect(foreign.status).toBe(404);
    expect(foreign.json.error.type).toBe("not_found");
    // One item above MAX_BODY_BYTES (1 MiB) is refused alone; the batch's own limit is larger.
    const big = { messages: msg("x".repeat(1024 * 1024 + 1)) };
    const res = await api.post(`/v1/pipelines/${pipeline}/add-batch`, { samples: [big, { messages: msg("small") }] });
    expect(res.status).toBe(200);
    expect(res.json.results[0].error).toMatchObject({ type: "payload_too_large", param: "samples[0]" });
    expect(res.json.results[1].id).toMatch(/^smp_/);
    expect((await other.api.post(`/v1/pipelines/${other.pipeline}/count`, {})).json).toEqual({ count: 0 });
    expect((await api.post(`/v1/pipelines/${pipeline}/count`, {})).json).toEqual({ count: 1 });
  });

  it("answers 413 past ADD_BATCH_MAX_BODY_BYTES (16 MiB)", async () => {
    const { api, pipeline } = await setup();
    const samples = Array.from({ length: 20 }, () => ({ messages: msg("y".repeat(900_000)) }));
    const res = await api.post(`/v1/pipelines/${pipeline}/add-batch`, { samples });
    expect(res.status).toBe(413);
    expect(res.json.error.type).toBe("payload_too_large");
    expect((await api.post(`/v1/pipelines/${pipeline}/count`, {})).json).toEqual({ count: 0 });
  });

  it("holds a team to 64 MiB of bodies being sent at once (429 past it); other teams are not held up", async () => {
    const { team, api, pipeline } = await setup();
    const other = await setup();
    // Four chunked uploads (no Content-Length: each counts as the route's 16 MiB), kept open.
    const uploads = holdUploads(
      `${baseUrl}/v1/pipelines/${pipeline}/add-batch`,
      { authorization: `Bearer ${team.apiKey}` },
      4,
      '{"samples":[',
    );
    const small = () => api.post(`/v1/pipelines/${pipeline}/add-batch`, { samples: [{ messages: msg("x") }] });
    // The uploads reach the app's handler once their head and first bytes have arrived.
    await new Promise((r) => setTimeout(r, 500));
    await expect.poll(async () => (await small()).status, { timeout: 10_000 }).toBe(429);
    const refused = await small();
    expect(refused.json.error.message).toMatch(/^Your team is sending 64\.0 MiB of request bodies at once/);
    expect(refused.headers.get("retry-after")).toBe("1");
    const theirs = await other.api.post(`/v1/pipelines/${other.pipeline}/add-batch`, {
      samples: [{ messages: msg("y") }],
    });
    expect(theirs.status).toBe(200);
    // Once the uploads are answered, the team's budget is back.
    uploads.finish(`${JSON.stringify({ messages: msg("z") })}]}`);
    expect(await uploads.answered()).toEqual([200, 200, 200, 200]);
    expect((await small()).status).toBe(200);
  });

  it("keeps selection order across batches and single adds", async () => {
    const { team, api, pipeline } = await setup();
    await addSamplesDirect(team.id, pipeline, 3);
    const batch = await api.post(`/v1/pipelines/${pipeline}/add-batch`, {
      samples: [{ messages: msg("a") }, { messages: msg("b") }],
    });
    const single = await api.post(`/v1/pipelines/${pipeline}/add`, { messages: msg("c") });
    const listed = (await api.post(`/v1/pipelines/${pipeline}/samples`, { offset: 3 })).json as { id: string }[];
    expect(listed.map((s) => s.id)).toEqual([...batch.json.results.map((r: { id: string }) => r.id), single.json.id]);
  });

  // The production server hands this route to its handler without Next's routing; its answers are
  // still compressed as Next.js compresses the others (1 kB or more, a client that takes gzip:
  // lib/http/node-response.ts).
  it("gzips a large answer for a client that takes gzip, and only then", async () => {
    const { team, pipeline } = await setup();
    const body = JSON.stringify({ samples: Array.from({ length: 40 }, (_, i) => ({ messages: msg(`z${i}`) })) });
    const post = (acceptEncoding?: string) =>
      new Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
        const req = request(`${baseUrl}/v1/pipelines/${pipeline}/add-batch`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${team.apiKey}`,
            "content-type": "application/json",
            ...(acceptEncoding ? { "accept-encoding": acceptEncoding } : {}),
          },
        });
        req.on("response", (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
        });
        req.on("error", reject);
        req.end(body);
      });
    const zipped = await post("gzip, deflate");
    expect(zipped.status).toBe(200);
    expect(zipped.headers["content-encoding"]).toBe("gzip");
    expect(String(zipped.headers.vary)).toMatch(/accept-encoding/i);
    const answer = JSON.parse(gunzipSync(zipped.body).toString()) as { results: unknown[] };
    expect(answer.results).toHaveLength(40);
    expect(Buffer.byteLength(JSON.stringify(answer))).toBeGreaterThan(1024);

    for (const refusing of [undefined, "gzip;q=0, deflate", "br"]) {
      const plain = await post(refusing);
      expect(plain.headers["content-encoding"], refusing).toBeUndefined();
      expect(Number(plain.headers["content-length"])).toBe(plain.body.length);
      expect((JSON.parse(plain.body.toString()) as { results: unknown[] }).results).toHaveLength(40);
    }
  });
});
