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
