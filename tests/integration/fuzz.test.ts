import http from "node:http";
import { eq } from "drizzle-orm";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { datasets, pipelines, samples } from "@/lib/db/schema";
import { baseUrl, client, db, makeTeam, type TestTeam } from "../helpers/context";
import { makeDeployment } from "../helpers/deployments";

/**
 * Hostile input on every request field of every endpoint that takes a body: never a 500, nothing
 * written by a refused request, and another team's concurrent adds all succeed meanwhile.
 */
type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const hostileString = fc.oneof(
  fc.constant("x\ud800y"), // unpaired surrogate: valid JSON, refused by jsonb
  fc.constant("\udfff"),
  fc.constant("a\u0000b"),
  fc.constant(""),
  fc.constant(" "),
  fc.constant("x".repeat(300_000)),
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.string({ unit: "grapheme", maxLength: 40 }),
);
const deep = (depth: number): Json => {
  let v: Json = [];
  for (let i = 0; i < depth; i++) v = [v];
  return v;
};
const hostileValue: fc.Arbitrary<Json> = fc.oneof(
  hostileString,
  fc.constant(null),
  fc.constant(true),
  fc.constant(-1),
  fc.constant(1e308),
  fc.constant(2 ** 31),
  fc.constant(0.5),
  fc.constant<Json>([]),
  fc.constant<Json>({}),
  fc.constant(deep(2_000)),
  fc.constant<Json>({ $in: ["a"] }),
  fc.array(hostileString, { maxLength: 3 }),
  fc.dictionary(hostileString, hostileString, { maxKeys: 3 }),
);

/** Every path (a.b[0].c) of a JSON value, and the value with the one at `path` replaced. */
function paths(v: Json, prefix: (string | number)[] = []): (string | number)[][] {
  const own = prefix.length > 0 ? [prefix] : [];
  if (Array.isArray(v)) return [...own, ...v.flatMap((x, i) => paths(x, [...prefix, i]))];
  if (v && typeof v === "object") return [...own, ...Object.entries(v).flatMap(([k, x]) => paths(x, [...prefix, k]))];
  return own;
}
function replaced(v: Json, path: (string | number)[], value: Json): Json {
  if (path.length === 0) return value;
  const [head, ...rest] = path;
  const copy = (Array.isArray(v) ? [...v] : { ...(v as object) }) as Record<string | number, Json>;
  copy[head!] = replaced(copy[head!] as Json, rest, value);
  return copy as Json;
}

type Endpoint = { path: string; body: Json; auth: string; method?: string };

async function endpoints(team: TestTeam): Promise<Endpoint[]> {
  const api = client(team.apiKey);
  const pipeline = (await api.post("/v1/pipelines/create", { name: "fuzz" })).json.id as string;
  const dep = await makeDeployment(team);
  const message = { role: "user", content: "hello" };
  const selection = { userId: "u", groupId: "g", metadata: { lang: "en" }, limit: 5, offset: 0 };
  const sampling = { max_tokens: 2, temperature: 0.5, top_p: 0.9, top_k: 5, stop: ["."], seed: 1 };
  return [
    { path: `/v1/pipelines/${pipeline}/add`, auth: team.apiKey, body: { messages: [message], ...selection } },
    {
      path: `/v1/pipelines/${pipeline}/add`,
      auth: team.apiKey,
      body: {
        messages: [
          {
            role: "assistant",
            content: null,
            tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }],
          },
          { role: "tool", content: "r", tool_call_id: "c1", name: "f" },
        ],
      },
    },
    {
      path: `/v1/pipelines/${pipeline}/add-batch`,
      auth: team.apiKey,
      body: { samples: [{ messages: [message], userId: "u", metadata: { lang: "en" } }, { messages: [message] }] },
    },
    {
      path: `/v1/pipelines/${pipeline}/delete-samples`,
      auth: team.apiKey,
      body: { userId: "nobody", groupId: "g", metadata: { lang: "zz" }, search: "absent" },
    },
    {
      path: `/v1/pipelines/${pipeline}`,
      method: "PATCH",
      auth: team.apiKey,
      body: { name: "renamed", retentionDays: 30 },
    },
    { path: `/v1/pipelines/${pipeline}/samples`, auth: team.apiKey, body: { ...selection, after: "smp_x" } },
    { path: "/v1/pipelines/create", auth: team.apiKey, body: { name: "fuzzed" } },
    { path: `/v1/pipelines/${pipeline}/samples`, auth: team.apiKey, body: selection },
    { path: `/v1/pipelines/${pipeline}/count`, auth: team.apiKey, body: selection },
    { path: `/v1/pipelines/${pipeline}/create-dataset`, auth: team.apiKey, body: { name: "fz", ...selection } },
    {
      path: "/v1/chat/completions",
      auth: team.apiKey,
      body: { model: dep.name, messages: [message], ...sampling, n: 1 },
    },
    {
      path: dep.path,
      auth: team.modelKey,
      body: { prompt: "hi", ...sampling, n: 1, bad_words: ["x"], logit_bias: { "1": 1 }, logprobs: 1 },
    },
  ];
}

async function rows(teamId: string) {
  const count = async (table: typeof samples | typeof pipelines | typeof datasets) =>
    (await db().db.select().from(table).where(eq(table.teamId, teamId))).length;
  return { samples: await count(samples), pipelines: await count(pipelines), datasets: await count(datasets) };
}

/** Sends raw bytes with a chosen framing: chunked in small pieces, or with a Content-Length. */
function raw(
  path: string,
  auth: string,
  bytes: Buffer,
  framing: "chunked" | "length",
  method = "POST",
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(baseUrl + path, {
      method,
      headers: {
        authorization: `Bearer ${auth}`,
        "content-type": "application/json",
        ...(framing === "length" ? { "content-length": String(bytes.length) } : {}),
      },
    });
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
    });
    req.on("error", reject);
    if (framing === "chunked") {
      for (let i = 0; i < bytes.length; i += 7) req.write(bytes.subarray(i, i + 7));
      req.end();
    } else req.end(bytes);
  });
}

describe("bad-input fuzz", () => {
  it("never answers 500, writes nothing when it refuses, and never fails another team's adds", async () => {
    const team = await makeTeam();
    const targets = await endpoints(team);
    const bystander = await makeTeam();
    const bystanderApi = client(bystander.apiKey);
    const bystanderPipeline = (await bystanderApi.post("/v1/pipelines/create", { name: "bystander" })).json
      .id as string;

    let stop = false;
    const bystanderStatuses: number[] = [];
    const bystanderLoop = (async () => {
      for (let i = 0; !stop; i++) {
        const res = await bystanderApi.post(`/v1/pipelines/${bystanderPipeline}/add`, {
          messages: [{ role: "user", content: `steady ${i}` }],
        });
        bystanderStatuses.push(res.status);
      }
    })();

    let accepted = 0;
    const before = await rows(team.id);
    const writes = { samples: 0, pipelines: 0, datasets: 0 };
    try {
      await fc.assert(
        fc.asyncProperty(
          fc.nat({ max: targets.length - 1 }),
          fc.nat(),
          hostileValue,
          fc.constantFrom("json", "chunked", "length", "truncated") as fc.Arbitrary<string>,
          async (which, pick, value, framing) => {
            const target = targets[which]!;
            const ps = paths(target.body);
            const mutated = replaced(target.body, ps[pick % ps.length]!, value);
            const text = JSON.stringify(mutated);
            const method = target.method ?? "POST";
            const { status, text: answer } =
              framing === "json"
                ? await client(target.auth).call(method, target.path, text)
                : await raw(
                    target.path,
                    target.auth,
                    Buffer.from(framing === "truncated" ? text.slice(0, Math.max(1, text.length >> 1)) : text),
                    framing === "truncated" ? "length" : (framing as "chunked" | "length"),
                    method,
                  );
            expect(status, `${method} ${target.path} ${framing} ${text.slice(0, 200)}`).toBeLessThan(500);
            if (status === 200) {
              accepted++;
              if (target.path.endsWith("/add")) writes.samples++;
              if (target.path.endsWith("/add-batch"))
                writes.samples += (JSON.parse(answer) as { results: { id?: string }[] }).results.filter(
                  (r) => r.id,
                ).length;
              if (target.path.endsWith("/delete-samples"))
                writes.samples -= (JSON.parse(answer) as { deleted: number }).deleted;
              if (target.path.endsWith("/pipelines/create")) writes.pipelines++;
              if (target.path.endsWith("/create-dataset")) writes.datasets++;
            }
          },
        ),
        { numRuns: 300, seed: 20261123 },
      );
    } finally {
      stop = true;
      await bystanderLoop;
    }
    // Writes happened exactly for the requests that were accepted.
    expect(await rows(team.id)).toEqual({
      samples: before.samples + writes.samples,
      pipelines: before.pipelines + writes.pipelines,
      datasets: before.datasets + writes.datasets,
    });
    expect(accepted).toBeLessThan(300); // most mutations are refused
    expect(bystanderStatuses.length).toBeGreaterThan(10);
    expect(new Set(bystanderStatuses)).toEqual(new Set([200]));
  }, 300_000);
});

// Input that passes a loose check but that Postgres cannot read (a 500 from the failed query, or
// for /samples a stream cut after its 200) or that zod drops without a word: each a 400 naming
// the field, and nothing changed.
describe("values the database cannot take", () => {
  it("are refused with a 400 naming the field, never a 500, and change nothing", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    const pipeline = (await api.post("/v1/pipelines/create", { name: "edges" })).json.id as string;
    for (const lang of ["en", "fr"])
      expect(
        (
          await api.post(`/v1/pipelines/${pipeline}/add`, {
            messages: [{ role: "user", content: lang }],
            userId: "u",
            metadata: { lang },
          })
        ).status,
      ).toBe(200);
    const dep = await makeDeployment(team);
    const before = await rows(team.id);

    const cases: [string, string, unknown, string][] = [
      // Postgres: "time zone displacement out of range", "date/time field value out of range".
      ["POST", `/v1/pipelines/${pipeline}/count`, { createdAfter: "2026-01-01T00:00:00+20:00" }, "createdAfter"],
      ["POST", `/v1/pipelines/${pipeline}/samples`, { createdBefore: "0000-01-01T00:00:00Z" }, "createdBefore"],
      [
        "POST",
        `/v1/pipelines/${pipeline}/delete-samples`,
        { userId: "u", createdAfter: "2026-01-01T00:00:00-16:00" },
        "createdAfter",
      ],
      ["GET", "/v1/usage?from=0000-01-01&to=0000-12-31", undefined, "from"],
      // Postgres reads at most 128 characters of a timestamp: a 500 (a cut-off 200 on samples) before.
      [
        "POST",
        `/v1/pipelines/${pipeline}/count`,
        { createdAfter: `2026-01-01T00:00:00.${"0".repeat(200)}Z` },
        "createdAfter",
      ],
      [
        "POST",
        `/v1/pipelines/${pipeline}/samples`,
        { createdBefore: `2026-01-01T00:00:00.${"0".repeat(200)}Z` },
        "createdBefore",
      ],
      // zod's record skips a `__proto__` key: this would have deleted all of u's samples.
      [
        "POST",
        `/v1/pipelines/${pipeline}/delete-samples`,
        '{"userId":"u","metadata":{"__proto__":"x"}}',
        "metadata.__proto__",
      ],
      ["POST", `/v1/pipelines/${pipeline}/count`, '{"metadata":{"__proto__":{"$exists":true}}}', "metadata.__proto__"],
      // A bias on `__proto__` was dropped without a word: nothing banned.
      [
        "POST",
        "/v1/completions",
        `{"model":"${dep.name}","prompt":"x","logit_bias":{"__proto__":-100}}`,
        "logit_bias.__proto__",
      ],
      [
        "POST",
        `/v1/pipelines/${pipeline}/add`,
        '{"messages":[{"role":"user","content":"x"}],"metadata":{"__proto__":"x"}}',
        "metadata.__proto__",
      ],
      // U+0000 in a looked-up value: a path segment, a model name (Postgres: "invalid byte sequence").
      ["GET", "/v1/pipelines/pipe_%00", undefined, "id"],
      ["POST", "/v1/pipelines/%00/count", {}, "id"],
      ["POST", `/v1/pipelines/pipe_%00/add`, { messages: [{ role: "user", content: "x" }] }, "id"],
      ["GET", "/v1/datasets/%00", undefined, "id"],
      ["POST", "/v1/chat/completions", { model: "a\u0000", messages: [{ role: "user", content: "x" }] }, "model"],
      ["POST", "/v1/completions", { model: "a\u0000", prompt: "x" }, "model"],
      // A typo in stream_options is refused, as every other unknown field.
      [
        "POST",
        "/v1/chat/completions",
        {
          model: dep.name,
          messages: [{ role: "user", content: "x" }],
          stream: true,
          stream_options: { include_usge: true },
        },
        "stream_options.include_usge",
      ],
      [
        "POST",
        "/v1/chat/completions",
        { model: dep.name, messages: [{ role: "user", content: "x" }], stream_options: { include_usage: true } },
        "stream_options",
      ],
    ];
    for (const [method, path, body, param] of cases) {
      const res = await api.call(method, path, body);
      expect({ path, body, status: res.status, param: res.json?.error?.param }).toEqual({
        path,
        body,
        status: 400,
        param,
      });
      expect(res.json.error.type).toBe("invalid_request");
    }
    // Bytes that are not UTF-8 (a Latin-1 "café"): refused, as an import refuses such a line
    // (before: stored with U+FFFD in its place).
    const latin1 = Buffer.concat([
      Buffer.from('{"messages":[{"role":"user","content":"caf'),
      Buffer.from([0xe9]),
      Buffer.from('"}],"userId":"u"}'),
    ]);
    for (const path of [`/v1/pipelines/${pipeline}/add`, `/v1/pipelines/${pipeline}/count`]) {
      const r = await fetch(baseUrl + path, {
        method: "POST",
        headers: { authorization: `Bearer ${team.apiKey}`, "content-type": "application/json" },
        body: latin1,
      });
      expect({ path, status: r.status, param: ((await r.json()) as any).error?.param }).toEqual({
        path,
        status: 400,
        param: "body",
      });
    }
    // A percent-escape that does not decode: the error body and a request id, as every other
    // answer (before: Next.js's HTML 400 page).
    for (const path of ["/v1/pipelines/%E0%A4%A", `${dep.path}%E0`]) {
      const r = await fetch(baseUrl + path, { method: "POST", headers: { authorization: `Bearer ${team.apiKey}` } });
      expect({ path, status: r.status, param: ((await r.json()) as any).error?.param }).toEqual({
        path,
        status: 400,
        param: "path",
      });
      expect(r.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]{32}$/);
    }
    // A deployment's GET stream takes plain decimal numbers only (before: length=0x10 ran 16 tokens).
    for (const query of ["length=0x10", "top_k=0b101", "temperature=Infinity"]) {
      const r = await fetch(`${dep.url}?text=hi&${query}`, { headers: { authorization: `Bearer ${team.modelKey}` } });
      expect({ query, status: r.status }).toEqual({ query, status: 400 });
      await r.body?.cancel();
    }
    // The deployment's own URL: the team segment.
    const segment = dep.path.split("/")[2]!;
    const res = await client(team.modelKey).post(dep.path.replace(segment, `${segment}%00`), { prompt: "x" });
    expect({ status: res.status, param: res.json?.error?.param }).toEqual({ status: 400, param: "team" });
    expect(await rows(team.id)).toEqual(before);
    expect((await api.post(`/v1/pipelines/${pipeline}/count`, { userId: "u" })).json).toMatchObject({ count: 2 });
  });
});

describe("a method a route does not serve", () => {
  it("is a 405 in the error shape, with Allow and a request id", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    const pipeline = (await api.post("/v1/pipelines/create", { name: "methods" })).json.id as string;
    for (const [method, path, allow] of [
      ["GET", `/v1/pipelines/${pipeline}/samples`, "POST, OPTIONS"],
      ["DELETE", "/v1/pipelines/list", "GET, HEAD, OPTIONS"],
      ["POST", `/v1/pipelines/${pipeline}`, "GET, PATCH, DELETE, HEAD, OPTIONS"],
      ["PUT", "/v1/models", "GET, HEAD, OPTIONS"],
    ] as const) {
      const res = await api.call(method, path);
      expect({ path, status: res.status, allow: res.headers.get("allow") }).toEqual({ path, status: 405, allow });
      expect(res.json.error).toMatchObject({
        type: "invalid_request",
        message: expect.stringContaining(`Method ${method}`),
      });
      expect(res.headers.get("x-request-id")).toBeTruthy();
    }
  });
});
