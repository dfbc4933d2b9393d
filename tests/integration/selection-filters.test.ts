import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { SampleSchema } from "@/lib/contracts/pipelines";
import { samples } from "@/lib/db/schema";
import { newId } from "@/lib/ids";
import { client, db, makeTeam, type TestTeam } from "../helpers/context";

// The selection filters beyond userId/groupId/metadata equality: metadata operators, date bounds,
// search and seeded sampling, on samples and count alike, each against the set the inserted
// samples say it must be.

type Api = ReturnType<typeof client>;
type Inserted = {
  id: string;
  userId: string;
  metadata: Record<string, string>;
  contents: string[];
  createdAt?: string;
};

async function newPipeline(api: Api): Promise<string> {
  return (await api.post("/v1/pipelines/create", { name: "p" })).json.id;
}

function selection(api: Api, pipelineId: string) {
  return {
    ids: async (filter: Record<string, unknown>) => {
      const res = await api.post(`/v1/pipelines/${pipelineId}/samples`, filter);
      expect(res.status, JSON.stringify(res.json)).toBe(200);
      return z
        .array(SampleSchema.strict())
        .parse(res.json)
        .map((s) => s.id);
    },
    count: async (filter: Record<string, unknown>) => {
      const res = await api.post(`/v1/pipelines/${pipelineId}/count`, filter);
      expect(res.status, JSON.stringify(res.json)).toBe(200);
      return res.json.count as number;
    },
  };
}

describe("metadata operators", () => {
  let api: Api;
  let pipelineId: string;
  const added: Inserted[] = [];
  // 36 samples: lang cycles en/fr/de/es/(none); code ab1/ab2/abc/b/ä (or none); tier gold on every 4th.
  const langs = ["en", "fr", "de", "es", undefined];
  const codes = ["ab1", "ab2", "abc", "b", "äx", undefined];

  beforeAll(async () => {
    api = client((await makeTeam()).apiKey);
    pipelineId = await newPipeline(api);
    for (let i = 0; i < 36; i++) {
      const metadata: Record<string, string> = {};
      if (langs[i % 5]) metadata.lang = langs[i % 5]!;
      if (codes[i % 6]) metadata.code = codes[i % 6]!;
      if (i % 4 === 0) metadata.tier = "gold";
      const userId = `u${i % 3}`;
      const res = await api.post(`/v1/pipelines/${pipelineId}/add`, {
        messages: [{ role: "user", content: `m${i}` }],
        userId,
        ...(Object.keys(metadata).length > 0 ? { metadata } : {}),
      });
      expect(res.status).toBe(200);
      added.push({ id: res.json.id, userId, metadata, contents: [`m${i}`] });
    }
  });

  type M = Inserted["metadata"];
  const cases: [string, Record<string, unknown>, (m: M, e: Inserted) => boolean][] = [
    ["$ne (also samples without the key)", { metadata: { lang: { $ne: "en" } } }, (m) => m.lang !== "en"],
    ["$in", { metadata: { lang: { $in: ["fr", "de"] } } }, (m) => m.lang === "fr" || m.lang === "de"],
    ["$in with a repeated value", { metadata: { lang: { $in: ["es", "es"] } } }, (m) => m.lang === "es"],
    [
      "$in of more values than are counted apart",
      { metadata: { lang: { $in: ["en", "fr", "de", "xx", "yy"] } } },
      (m) => ["en", "fr", "de"].includes(m.lang!),
    ],
    [
      "$in + $ne (each value counted apart, the negative probed)",
      { metadata: { lang: { $in: ["en", "fr"] }, tier: { $ne: "gold" } } },
      (m) => (m.lang === "en" || m.lang === "fr") && m.tier !== "gold",
    ],
    ["no filter (the pipeline's kept count)", {}, () => true],
    ["$exists: true", { metadata: { lang: { $exists: true } } }, (m) => m.lang !== undefined],
    ["$exists: false", { metadata: { lang: { $exists: false } } }, (m) => m.lang === undefined],
    ["$prefix", { metadata: { code: { $prefix: "ab" } } }, (m) => m.code?.startsWith("ab") ?? false],
    ["$prefix of a non-ASCII value", { metadata: { code: { $prefix: "ä" } } }, (m) => m.code?.startsWith("ä") ?? false],
    ["$prefix that is a whole value", { metadata: { code: { $prefix: "b" } } }, (m) => m.code === "b"],
    ["$prefix matching nothing", { metadata: { code: { $prefix: "zz" } } }, () => false],
    [
      "equality + $ne",
      { metadata: { tier: "gold", lang: { $ne: "fr" } } },
      (m) => m.tier === "gold" && m.lang !== "fr",
    ],
    [
      "two negatives",
      { metadata: { lang: { $ne: "en" }, code: { $exists: false } } },
      (m) => m.lang !== "en" && m.code === undefined,
    ],
    [
      "$in + $prefix + $exists: false",
      { metadata: { lang: { $in: ["en", "de"] }, code: { $prefix: "a" }, tier: { $exists: false } } },
      (m) => (m.lang === "en" || m.lang === "de") && (m.code?.startsWith("a") ?? false) && m.tier === undefined,
    ],
    ["$ne + userId", { userId: "u1", metadata: { code: { $ne: "b" } } }, (m, e) => e.userId === "u1" && m.code !== "b"],
    [
      "$exists: true + userId",
      { userId: "u2", metadata: { tier: { $exists: true } } },
      (m, e) => e.userId === "u2" && m.tier !== undefined,
    ],
  ];
  for (const [name, filter, predicate] of cases) {
    it(`${name}: samples and count agree with the inserted samples`, async () => {
      const want = added.filter((e) => predicate(e.metadata, e)).map((e) => e.id);
      const s = selection(api, pipelineId);
      expect(await s.ids(filter)).toEqual(want);
      expect(await s.count(filter)).toBe(want.length);
      // Paged, the same samples in the same order.
      const paged = [...(await s.ids({ ...filter, limit: 4 })), ...(await s.ids({ ...filter, limit: 4, offset: 4 }))];
      expect(paged).toEqual(want.slice(0, 8));
      expect(await s.count({ ...filter, limit: 4, offset: 2 })).toBe(Math.min(4, Math.max(0, want.length - 2)));
    });
  }

  it("count takes operators inside a JSON-encoded metadata string", async () => {
    const want = added.filter((e) => e.metadata.lang !== "en").length;
    expect(await selection(api, pipelineId).count({ metadata: JSON.stringify({ lang: { $ne: "en" } }) })).toBe(want);
  });

  it("rejects malformed operators with the offending param", async () => {
    const cases: [unknown, string][] = [
      [{ lang: { $in: [] } }, "metadata.lang.$in"],
      [{ lang: { $in: "en" } }, "metadata.lang"],
      [{ lang: { $ne: 1 } }, "metadata.lang"],
      [{ lang: { $eq: "en" } }, "metadata.lang"],
      [{ lang: { $ne: "en", $in: ["fr"] } }, "metadata.lang"],
      [{ lang: { $exists: "yes" } }, "metadata.lang"],
      [{ lang: { $prefix: "" } }, "metadata.lang.$prefix"],
      [{ lang: ["en"] }, "metadata.lang"],
    ];
    for (const [metadata, param] of cases) {
      for (const op of ["samples", "count", "create-dataset"]) {
        const res = await api.post(`/v1/pipelines/${pipelineId}/${op}`, { metadata, name: "x" });
        expect(res.status, `${op} ${JSON.stringify(metadata)}`).toBe(400);
        expect(res.json.error).toMatchObject({ type: "invalid_request", param });
      }
    }
    expect((await api.get("/v1/datasets/list")).json).toEqual([]);
  });
});

/** n samples one second apart, straight into the database (millisecond timestamps, known exactly). */
async function timedSamples(team: TestTeam, pipelineId: string, contents: string[][]): Promise<Inserted[]> {
  const base = Date.UTC(2026, 0, 1, 12, 0, 0);
  const rows = contents.map((texts, i) => ({
    id: newId("sample"),
    pipelineId,
    teamId: team.id,
    messages: texts.map((content, j) => ({ role: j % 2 ? ("assistant" as const) : ("user" as const), content })),
    length: texts.length,
    userId: `u${i % 2}`,
    createdAt: new Date(base + i * 1000),
  }));
  await db().db.insert(samples).values(rows);
  return rows.map((r) => ({
    id: r.id,
    userId: r.userId,
    metadata: {},
    contents: texts(r.messages),
    createdAt: r.createdAt.toISOString(),
  }));
}
const texts = (messages: { content: string }[]) => messages.map((m) => m.content);

describe("date bounds", () => {
  it("createdAfter and createdBefore are strict, combine, and accept offsets", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    const pipelineId = await newPipeline(api);
    const rows = await timedSamples(
      team,
      pipelineId,
      Array.from({ length: 12 }, (_, i) => [`t${i}`]),
    );
    const s = selection(api, pipelineId);
    const at = (i: number) => rows[i]!.createdAt!;
    const ids = (from: number, to: number) => rows.slice(from, to).map((r) => r.id);
    expect(await s.ids({ createdAfter: at(4) })).toEqual(ids(5, 12));
    expect(await s.ids({ createdBefore: at(4) })).toEqual(ids(0, 4));
    expect(await s.ids({ createdAfter: at(2), createdBefore: at(9) })).toEqual(ids(3, 9));
    expect(await s.count({ createdAfter: at(2), createdBefore: at(9) })).toBe(6);
    expect(await s.ids({ createdAfter: at(9), createdBefore: at(2) })).toEqual([]);
    // The same instant written with an offset; and a bound between two samples.
    const plusTwo = new Date(Date.parse(at(6)) + 2 * 3600_000).toISOString().replace("Z", "+02:00");
    expect(await s.ids({ createdBefore: plusTwo })).toEqual(ids(0, 6));
    expect(await s.ids({ createdAfter: new Date(Date.parse(at(7)) - 500).toISOString() })).toEqual(ids(7, 12));
    expect(await s.ids({ createdAfter: at(3), userId: "u1" })).toEqual(
      rows.filter((r, i) => i > 3 && r.userId === "u1").map((r) => r.id),
    );
    for (const [body, param] of [
      [{ createdAfter: "yesterday" }, "createdAfter"],
      [{ createdBefore: "2026-01-01" }, "createdBefore"],
      [{ createdBefore: "2026-01-01T00:00:00" }, "createdBefore"],
      [{ createdAfter: 1767268800000 }, "createdAfter"],
    ] as const) {
      const res = await api.post(`/v1/pipelines/${pipelineId}/samples`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error.param).toBe(param);
    }
  });
});

describe("search", () => {
  const conversations = [
    ["Hello World", "hi"],
    ["say hello there"],
    ["HELLO"],
    ["line1\nice cream"],
    ['she said "quote" twice'],
    ["abc", "def"],
    ["ÉCOLE normale"],
    ["100% sure", "a_b c"],
    ["back\\slash"],
    ["nothing to see"],
  ];
  let api: Api;
  let pipelineId: string;
  let rows: Inserted[];
  beforeAll(async () => {
    const team = await makeTeam();
    api = client(team.apiKey);
    pipelineId = await newPipeline(api);
    rows = await timedSamples(team, pipelineId, conversations);
  });

  const terms = [
    "hello",
    "WORLD",
    "nice",
    "n",
    'e "quote',
    "c\nd",
    'c", "d',
    "école",
    "%",
    "0% s",
    "a_b",
    "_",
    "\\s",
    "zzz",
    "\\",
    "e",
  ];
  for (const term of terms) {
    it(`finds ${JSON.stringify(term)} case-insensitively inside one message`, async () => {
      const want = rows
        .filter((r) => r.contents.some((c) => c.toLowerCase().includes(term.toLowerCase())))
        .map((r) => r.id);
      const s = selection(api, pipelineId);
      expect(await s.ids({ search: term })).toEqual(want);
      expect(await s.count({ search: term })).toBe(want.length);
    });
  }

  it("combines with the other filters, and refuses an empty term", async () => {
    const s = selection(api, pipelineId);
    const want = rows.filter((r) => r.userId === "u0" && r.contents.some((c) => c.toLowerCase().includes("e")));
    expect(await s.ids({ search: "e", userId: "u0" })).toEqual(want.map((r) => r.id));
    expect(await s.ids({ search: "e", createdAfter: rows[5]!.createdAt })).toEqual(
      rows
        .slice(6)
        .filter((r) => r.contents.some((c) => c.toLowerCase().includes("e")))
        .map((r) => r.id),
    );
    const res = await api.post(`/v1/pipelines/${pipelineId}/samples`, { search: "" });
    expect(res.status).toBe(400);
    expect(res.json.error.param).toBe("search");
  });
});

describe("seeded sampling", () => {
  let api: Api;
  let pipelineId: string;
  let rows: Inserted[];
  beforeAll(async () => {
    const team = await makeTeam();
    api = client(team.apiKey);
    pipelineId = await newPipeline(api);
    rows = await timedSamples(
      team,
      pipelineId,
      Array.from({ length: 60 }, (_, i) => [`s${i}`]),
    );
  });

  /** The documented pick: the `size` ids first in the order of hashtextextended(id, seed), then id. */
  async function documentedPick(ids: string[], size: number, seed: number): Promise<Set<string>> {
    const picked = await db().db.execute<{ id: string }>(
      sql`select id from unnest(${`{${ids.join(",")}}`}::text[]) as t(id) order by hashtextextended(id, ${seed}), id limit ${size}`,
    );
    return new Set(picked.map((r) => r.id));
  }

  it("picks exactly `size` samples, in selection order, the same for the same seed and others for another", async () => {
    const s = selection(api, pipelineId);
    const all = rows.map((r) => r.id);
    const first = await s.ids({ sample: { size: 10, seed: 7 } });
    expect(first).toHaveLength(10);
    expect(first).toEqual(all.filter((id) => first.includes(id))); // selection order
    expect(new Set(first)).toEqual(await documentedPick(all, 10, 7));
    expect(await s.ids({ sample: { size: 10, seed: 7 } })).toEqual(first);
    const other = await s.ids({ sample: { size: 10, seed: 8 } });
    expect(other).toHaveLength(10);
    expect(other).not.toEqual(first);
    expect(new Set(other)).toEqual(await documentedPick(all, 10, 8));
    expect(await s.count({ sample: { size: 10, seed: 7 } })).toBe(10);
    expect(await s.ids({ sample: { size: 1000, seed: 7 } })).toEqual(all);
    expect(await s.count({ sample: { size: 1000, seed: 7 } })).toBe(60);
  });

  it("samples after the filters and before limit and offset", async () => {
    const s = selection(api, pipelineId);
    const u1 = rows.filter((r) => r.userId === "u1").map((r) => r.id);
    const picked = await s.ids({ userId: "u1", sample: { size: 8, seed: 3 } });
    expect(new Set(picked)).toEqual(await documentedPick(u1, 8, 3));
    expect(await s.ids({ userId: "u1", sample: { size: 8, seed: 3 }, limit: 3, offset: 2 })).toEqual(
      picked.slice(2, 5),
    );
    expect(await s.count({ userId: "u1", sample: { size: 8, seed: 3 }, limit: 3, offset: 6 })).toBe(2);
  });

  it("refuses a bad sample spec with the offending param", async () => {
    for (const [sample, param] of [
      [{ size: 0, seed: 1 }, "sample.size"],
      [{ size: 1.5, seed: 1 }, "sample.size"],
      [{ size: 5 }, "sample.seed"],
      [{ size: 5, seed: -1 }, "sample.seed"],
      [{ size: 5, seed: 1, extra: 1 }, "sample.extra"],
      [5, "sample"],
    ] as const) {
      const res = await api.post(`/v1/pipelines/${pipelineId}/count`, { sample });
      expect(res.status, JSON.stringify(sample)).toBe(400);
      expect(res.json.error.param).toBe(param);
    }
  });
});
