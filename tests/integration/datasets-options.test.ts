import { createHash } from "node:crypto";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { gunzipSync } from "node:zlib";
import { AutoTokenizer } from "@/workers/engine/transformers";
import { asyncBufferFromFile, parquetReadObjects } from "hyparquet";
import { inject } from "vitest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "drizzle-orm";
import { samples } from "@/lib/db/schema";
import { newId } from "@/lib/ids";
import { splitSideSql } from "@/lib/services/dataset-jobs";
import { createDeployment } from "@/lib/services/deployments";
import { client, db, makeTeam, type TestTeam } from "../helpers/context";
import { Dataset, download, downloadBytes, parseLines, waitForStatus } from "../helpers/datasets";
import { makeDeployment } from "../helpers/deployments";

// Dataset options end to end: created over HTTP, packaged by the suite's worker, the files read
// back (gzip with zlib, Parquet with hyparquet, a reader independent of DuckDB, the writer) and compared with
// what the inserted samples say each option must produce. The rules are written again here, from
// docs/api.md, rather than imported from the packager.

type Api = ReturnType<typeof client>;
type Msg = { role: string; content: string };
type Row = {
  id: string;
  createdAt: Date;
  userId: string | null;
  groupId: string | null;
  metadata: Record<string, string> | null;
  messages: Msg[];
};

const conv = (...pairs: [string, string][]): Msg[] => pairs.map(([role, content]) => ({ role, content }));

/** Conversations with every case the options look at; the same list, in order, in each pipeline. */
function conversations(): Msg[][] {
  const out: Msg[][] = [];
  for (let i = 0; i < 40; i++) {
    const long = i % 7 === 0 ? " with a much longer question that goes on and on about many things" : "";
    out.push(
      conv(["system", "You answer briefly."], ["user", `question ${i}${long}`], ["assistant", `answer ${i % 11}`]),
    );
  }
  out.push(conv(["user", "no answer here"])); // no assistant message
  out.push(conv(["user", ""], ["assistant", "empty question"])); // empty content
  out.push(conv(["user", "hi"], ["system", "late system"], ["assistant", "hello"])); // system not first
  out.push(conv(["function", "42"], ["assistant", "ok"])); // unknown role (only possible in stored data)
  out.push(conv(["system", "You answer briefly."], ["user", "  question 3 "], ["assistant", "answer 3\n"])); // duplicate of #3 once trimmed
  out.push(conv(["system", "You answer briefly."], ["user", "question 5"], ["assistant", "answer 5"])); // exact duplicate of #5
  out.push(conv(["user", "Question 5"], ["assistant", "answer 5"])); // not a duplicate (case, no system)
  // Text that Postgres escapes or that is not ASCII, trimmed of whitespace beyond ASCII's.
  const quoted = 'say "hi"\n\tthen \\ stop \u0001';
  out.push(conv(["user", quoted], ["assistant", "好的 😀\u2028"]));
  // (U+FEFF not first: the Parquet reader's TextDecoder drops a leading one, as decoders do with a BOM.)
  out.push(conv(["user", `\u00a0\ufeff${quoted}\r\n`], ["assistant", "\u3000好的 😀"])); // duplicate once trimmed
  out.push(conv(["user", `${quoted}\u0001`], ["assistant", "好的 😀"])); // not one: U+0001 is not trimmed
  return out;
}

/** A pipeline of those conversations, inserted in order one millisecond apart (labels on some). */
async function seeded(team: TestTeam, api: Api): Promise<{ pipelineId: string; rows: Row[] }> {
  const pipelineId = (await api.post("/v1/pipelines/create", { name: "p" })).json.id as string;
  const base = Date.now() - 86_400_000; // in the past: samples added later over the API sort after them
  const rows: Row[] = conversations().map((messages, i) => ({
    id: newId("sample"),
    createdAt: new Date(base + i),
    userId: i % 3 ? `u${i % 3}` : null,
    groupId: i % 4 === 1 ? "g1" : null,
    metadata: i % 5 === 0 ? { lang: "en", i: String(i) } : null,
    messages,
  }));
  await db()
    .db.insert(samples)
    .values(
      rows.map((r) => ({
        ...r,
        pipelineId,
        teamId: team.id,
        length: r.messages.length,
        messages: r.messages as never,
      })),
    );
  return { pipelineId, rows };
}

// ---- the documented rules, independently ----
function refusal(m: Msg[]): string | undefined {
  if (m.some((x) => !["system", "user", "assistant", "tool"].includes(x.role))) return "unknown_role";
  if (m.some((x) => x.content === "")) return "empty_content";
  if (m.some((x, i) => i > 0 && x.role === "system")) return "system_not_first";
  if (!m.some((x) => x.role === "assistant")) return "no_assistant_message";
  return undefined;
}
const dedupeKey = (m: Msg[]) => JSON.stringify(m.map((x) => [x.role, x.content.trim()]));
function side(id: string, split: { validation: number; seed: number }): "train" | "validation" {
  const h = createHash("sha256").update(`${split.seed}:${id}`).digest();
  return h.readUIntBE(0, 6) / 2 ** 48 < split.validation ? "validation" : "train";
}
const nearestRank = (sorted: number[], p: number) =>
  sorted.length === 0 ? 0 : sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)]!;

let tokenizer: Awaited<ReturnType<typeof AutoTokenizer.from_pretrained>>;
const tokensOf = (m: Msg[]) =>
  tokenizer.encode(tokenizer.apply_chat_template(m, { tokenize: false, add_generation_prompt: false }) as string, {
    add_special_tokens: false,
  }).length;

let tmp: string;
beforeAll(async () => {
  tokenizer = await AutoTokenizer.from_pretrained(inject("tinyModel"), { local_files_only: true });
  tmp = mkdtempSync(path.join(os.tmpdir(), "lmp-ds-options-"));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** A Parquet file's rows, read by hyparquet (the packager writes with DuckDB). */
async function readParquet(bytes: Buffer): Promise<Row[]> {
  const file = path.join(tmp, `${newId("dataset")}.parquet`);
  writeFileSync(file, bytes);
  const rows = await parquetReadObjects({
    file: await asyncBufferFromFile(file),
    parsers: { timestampFromMicroseconds: (us: bigint) => us } as never,
  });
  return rows.map((r) => ({
    id: r.id as string,
    createdAt: new Date(Number(r.createdAt) / 1000),
    userId: r.userId as string | null,
    groupId: r.groupId as string | null,
    metadata: r.metadata === null ? null : JSON.parse(r.metadata as string),
    messages: (r.messages as Record<string, unknown>[]).map(asGiven),
  }));
}

/** A Parquet message as it was given: its null columns absent, tool_calls parsed from their JSON. */
function asGiven(m: Record<string, unknown>): Msg {
  const given = Object.fromEntries(Object.entries(m).filter(([k, v]) => v !== null || k === "content"));
  if (typeof given.tool_calls === "string") given.tool_calls = JSON.parse(given.tool_calls);
  return given as Msg;
}

type Options = Record<string, unknown>;
/** What the documented rules say a dataset of `rows` with `options` holds, per file. */
function expected(rows: Row[], options: Options) {
  const invalid: Record<string, number> = {};
  const seen = new Set<string>();
  let duplicate = 0;
  let tooLong = 0;
  const kept: (Row & { tokens?: number })[] = [];
  for (const r of rows) {
    if (options.validate) {
      const reason = refusal(r.messages);
      if (reason) {
        invalid[reason] = (invalid[reason] ?? 0) + 1;
        continue;
      }
    }
    if (options.dedupe) {
      if (seen.has(dedupeKey(r.messages))) {
        duplicate++;
        continue;
      }
      seen.add(dedupeKey(r.messages));
    }
    const tokens = options.tokenizer ? tokensOf(r.messages) : undefined;
    if (tokens !== undefined && options.maxTokens !== undefined && tokens > (options.maxTokens as number)) {
      tooLong++;
      continue;
    }
    kept.push({ ...r, tokens });
  }
  const split = options.split as { validation: number; seed: number } | undefined;
  const files: Record<string, (Row & { tokens?: number })[]> = split
    ? {
        train: kept.filter((r) => side(r.id, split) === "train"),
        validation: kept.filter((r) => side(r.id, split) === "validation"),
      }
    : { all: kept };
  const sorted = kept.map((r) => r.tokens!).sort((a, b) => a - b);
  return { files, invalid, duplicate, tooLong, sorted };
}

/** The file's samples as rows (JSONL lines carry only messages) and the file as bytes. */
async function readFile(api: Api, id: string, options: Options, split?: string) {
  const bytes = await downloadBytes(api, id, split);
  if (options.format === "parquet") return { bytes, rows: await readParquet(bytes) };
  const text = (options.compression === "gzip" ? gunzipSync(bytes) : bytes).toString("utf8");
  return { bytes, rows: (parseLines(text) as { messages: Msg[] }[]).map((l) => ({ messages: l.messages }) as Row) };
}

describe("dataset options", () => {
  let team: TestTeam;
  let api: Api;
  let pipelineId: string;
  let rows: Row[];
  let deployment: string;
  beforeAll(async () => {
    team = await makeTeam();
    api = client(team.apiKey);
    ({ pipelineId, rows } = await seeded(team, api));
    deployment = (await makeDeployment(team)).name;
  });

  const cases: [string, Options][] = [
    ["gzip", { compression: "gzip" }],
    ["validate", { validate: "openai-chat" }],
    ["dedupe", { dedupe: true }],
    ["split", { split: { validation: 0.3, seed: 11 } }],
    ["parquet", { format: "parquet" }],
    ["tokenizer", { tokenizer: "$dep" }],
    ["tokenizer + maxTokens", { tokenizer: "$dep", maxTokens: 40 }],
    [
      "dedupe + split + validate + gzip",
      { dedupe: true, split: { validation: 0.25, seed: 3 }, validate: "openai-chat", compression: "gzip" },
    ],
    [
      "everything, in Parquet",
      {
        format: "parquet",
        dedupe: true,
        split: { validation: 0.4, seed: 5 },
        validate: "openai-chat",
        tokenizer: "$dep",
        maxTokens: 42,
      },
    ],
  ];
  for (const [name, given] of cases) {
    it(`${name}: the files hold what the rules say, and the stats count them`, async () => {
      const options = Object.fromEntries(Object.entries(given).map(([k, v]) => [k, v === "$dep" ? deployment : v]));
      const res = await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, {
        name: `d-${newId("dataset").slice(5, 15)}`,
        ...options,
      });
      expect(res.status, JSON.stringify(res.json)).toBe(200);
      expect(Dataset.parse(res.json).size).toBe(rows.length);
      const ready = await waitForStatus(api, res.json.id, "READY");
      const want = expected(rows, options);
      const splits = Object.keys(want.files).filter((k) => k !== "all");
      expect(ready.files.map((f) => f.split)).toEqual(splits.length ? splits : [null]);
      let included = 0;
      for (const [key, wantRows] of Object.entries(want.files)) {
        const split = key === "all" ? undefined : key;
        const file = await readFile(api, ready.id, options, split);
        const meta = ready.files.find((f) => f.split === (split ?? null))!;
        expect(meta.name).toBe(
          `${ready.name}${split ? `-${split}` : ""}.${options.format === "parquet" ? "parquet" : options.compression === "gzip" ? "jsonl.gz" : "jsonl"}`,
        );
        expect(meta.bytes).toBe(file.bytes.length);
        expect(meta.checksum).toBe(`sha256:${createHash("sha256").update(file.bytes).digest("hex")}`);
        expect(meta.samples).toBe(file.rows.length);
        if (options.format === "parquet") expect(file.rows).toEqual(wantRows.map(({ tokens: _t, ...r }) => r));
        else expect(file.rows.map((r) => r.messages)).toEqual(wantRows.map((r) => r.messages));
        included += file.rows.length;
      }
      const stats = ready.stats!;
      expect(stats.included).toBe(included);
      expect(ready.size).toBe(included);
      expect(stats.skipped?.invalid).toEqual(options.validate ? want.invalid : undefined);
      expect(stats.skipped?.duplicate).toBe(options.dedupe ? want.duplicate : undefined);
      expect(stats.skipped?.tooLong).toBe(options.maxTokens !== undefined ? want.tooLong : undefined);
      if (!options.validate && !options.dedupe && options.maxTokens === undefined)
        expect(stats.skipped).toBeUndefined();
      expect(stats.splits).toEqual(
        splits.length ? { train: want.files.train!.length, validation: want.files.validation!.length } : undefined,
      );
      if (options.tokenizer) {
        const s = want.sorted;
        expect(stats.tokens).toMatchObject({
          total: s.reduce((a, b) => a + b, 0),
          p50: nearestRank(s, 0.5),
          p95: nearestRank(s, 0.95),
          max: s.at(-1),
        });
        const { binWidth, counts } = stats.tokens!.histogram;
        expect(counts.reduce((a, b) => a + b, 0)).toBe(s.length);
        for (const [i, n] of counts.entries()) expect(n).toBe(s.filter((t) => Math.floor(t / binWidth) === i).length);
      } else expect(stats.tokens).toBeUndefined();
    });
  }

  it("the options actually left samples out and split them (the cases above are not vacuous)", () => {
    const all = expected(rows, { validate: "openai-chat", dedupe: true, tokenizer: "x", maxTokens: 40 });
    expect(Object.keys(all.invalid).sort()).toEqual([
      "empty_content",
      "no_assistant_message",
      "system_not_first",
      "unknown_role",
    ]);
    expect(all.duplicate).toBe(3);
    expect(all.tooLong).toBeGreaterThan(0);
    const split = expected(rows, { split: { validation: 0.3, seed: 11 } }).files;
    expect(split.train!.length).toBeGreaterThan(0);
    expect(split.validation!.length).toBeGreaterThan(0);
  });

  it("downloads one file of a split dataset by ?split=, and refuses a missing or wrong split", async () => {
    const split = await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, {
      name: "split-dl",
      split: { validation: 0.5, seed: 1 },
    });
    const plain = await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, { name: "plain-dl" });
    await waitForStatus(api, split.json.id, "READY");
    await waitForStatus(api, plain.json.id, "READY");
    for (const [id, query] of [
      [split.json.id, ""],
      [split.json.id, "?split=test"],
      [plain.json.id, "?split=train"],
      [split.json.id, "?other=1"],
    ]) {
      const res = await api.get(`/v1/datasets/${id}/download${query}`);
      expect(res.status, query).toBe(400);
      expect(res.json.error.param, query).toBe(query.startsWith("?other") ? "other" : "split");
    }
    const train = await downloadBytes(api, split.json.id, "train");
    const validation = await downloadBytes(api, split.json.id, "validation");
    expect(parseLines(train.toString()).length + parseLines(validation.toString()).length).toBe(rows.length);
  });

  it("split by group: a conversation's samples (one groupId) all go to one side, by the documented key", async () => {
    const p = (await api.post("/v1/pipelines/create", { name: "grouped" })).json.id as string;
    const samples = Array.from({ length: 60 }, (_, i) => ({
      messages: conv(["user", `turn ${i}`], ["assistant", `reply ${i}`]),
      ...(i < 48 ? { groupId: `conv-${i % 12}` } : {}), // 12 conversations of 4 turns; 12 alone
    }));
    const added = await api.post(`/v1/pipelines/${p}/add-batch`, { samples });
    expect(added.status, added.text).toBe(200);
    const ids = (added.json.results as { id: string }[]).map((r) => r.id);
    const split = { validation: 0.5, seed: 4 };
    // The key of each sample: its conversation, or (alone) its own id.
    const key = (i: number) => (i < 48 ? `conv-${i % 12}` : ids[i]!);
    // By sample (the default), some conversation lands on both sides: its turns leak into validation.
    const bySample = new Map<string, Set<string>>();
    for (let i = 0; i < 48; i++) bySample.set(key(i), (bySample.get(key(i)) ?? new Set()).add(side(ids[i]!, split)));
    expect([...bySample.values()].some((sides) => sides.size === 2)).toBe(true);

    const made = await api.post(`/v1/pipelines/${p}/create-dataset`, {
      name: "by-group",
      split: { ...split, by: "group" },
    });
    expect(made.status, made.text).toBe(200);
    const ready = await waitForStatus(api, made.json.id, "READY");
    expect(ready.options.split).toEqual({ ...split, by: "group" });
    const sideOf = new Map<string, string>();
    for (const name of ["train", "validation"] as const)
      for (const line of parseLines((await downloadBytes(api, ready.id, name)).toString()) as { messages: Msg[] }[])
        sideOf.set(line.messages[0]!.content, name);
    expect(sideOf.size).toBe(60);
    // Each sample on the side of its key's hash: a conversation's turns together.
    for (let i = 0; i < 60; i++) expect(sideOf.get(`turn ${i}`), `turn ${i}`).toBe(side(key(i), split));
    expect(new Set(sideOf.values()).size).toBe(2); // both sides used
  });

  it("split by user: one user's samples all go to one side, by the documented key", async () => {
    const p = (await api.post("/v1/pipelines/create", { name: "by-user" })).json.id as string;
    const samples = Array.from({ length: 60 }, (_, i) => ({
      messages: conv(["user", `ask ${i}`], ["assistant", `reply ${i}`]),
      ...(i < 48 ? { userId: `u-${i % 8}` } : {}), // 8 users with 6 samples each; 12 without one
    }));
    const added = await api.post(`/v1/pipelines/${p}/add-batch`, { samples });
    expect(added.status, added.text).toBe(200);
    const ids = (added.json.results as { id: string }[]).map((r) => r.id);
    const split = { validation: 0.5, seed: 9 };
    const key = (i: number) => (i < 48 ? `user:u-${i % 8}` : ids[i]!);
    const made = await api.post(`/v1/pipelines/${p}/create-dataset`, {
      name: "by-user",
      split: { ...split, by: "user" },
    });
    expect(made.status, made.text).toBe(200);
    const ready = await waitForStatus(api, made.json.id, "READY");
    expect(ready.options.split).toEqual({ ...split, by: "user" });
    const sideOf = new Map<string, string>();
    for (const name of ["train", "validation"] as const)
      for (const line of parseLines((await downloadBytes(api, ready.id, name)).toString()) as { messages: Msg[] }[])
        sideOf.set(line.messages[0]!.content, name);
    expect(sideOf.size).toBe(60);
    // Before: by sample only, a user's phrasing in train and in validation.
    for (let i = 0; i < 60; i++) expect(sideOf.get(`ask ${i}`), `ask ${i}`).toBe(side(key(i), split));
    for (let u = 0; u < 8; u++)
      expect(new Set(Array.from({ length: 6 }, (_, k) => sideOf.get(`ask ${u + 8 * k}`))).size, `u-${u}`).toBe(1);
    expect(new Set(sideOf.values()).size).toBe(2);
  });

  it("keeps the selection frozen with options: samples added afterwards are in no file", async () => {
    const res = await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, {
      name: "frozen-options",
      split: { validation: 0.5, seed: 2 },
      dedupe: true,
    });
    for (let i = 0; i < 5; i++) {
      await api.post(`/v1/pipelines/${pipelineId}/add`, {
        messages: conv(["user", `added after creation ${i}`], ["assistant", "x"]),
      });
    }
    const ready = await waitForStatus(api, res.json.id, "READY");
    const want = expected(rows, { split: { validation: 0.5, seed: 2 }, dedupe: true });
    expect(ready.stats!.included).toBe(want.files.train!.length + want.files.validation!.length);
    const text =
      (await downloadBytes(api, ready.id, "train")).toString() +
      (await downloadBytes(api, ready.id, "validation")).toString();
    expect(text).not.toContain("added after creation");
  });

  it("leaves out a sample the model's chat template refuses, not the whole dataset, and counts it", async () => {
    // The tiny model's tokenizer with a template that refuses system messages, as Gemma's does.
    const model = mkdtempSync(path.join(tmp, "no-system-"));
    for (const f of ["tokenizer.json", "tokenizer_config.json", "config.json"])
      copyFileSync(path.join(inject("tinyModel"), f), path.join(model, f));
    writeFileSync(
      path.join(model, "chat_template.jinja"),
      "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}" +
        "{% endif %}{{ m.role }}: {{ m.content }}\n{% endfor %}",
    );
    const strict = await createDeployment(db().db, {
      teamId: team.id,
      name: `strict-${newId("dataset").slice(5, 12)}`,
      model,
    });
    const pipeline = (await api.post("/v1/pipelines/create", { name: "template" })).json.id as string;
    for (const messages of [
      conv(["user", "a"], ["assistant", "b"]),
      conv(["system", "s"], ["user", "c"]),
      conv(["user", "d"]),
    ])
      expect((await api.post(`/v1/pipelines/${pipeline}/add`, { messages })).status).toBe(200);
    const res = await api.post(`/v1/pipelines/${pipeline}/create-dataset`, {
      name: "templated",
      tokenizer: strict.name,
    });
    expect(res.status, res.text).toBe(200);
    const ready = await waitForStatus(api, res.json.id, "READY"); // before: FAILED, "Could not write the dataset file…"
    expect(ready.stats).toMatchObject({ included: 2, skipped: { template: 1 } });
    const lines = parseLines((await downloadBytes(api, ready.id)).toString("utf8")) as { messages: Msg[] }[];
    expect(lines.map((l) => l.messages[0]!.content)).toEqual(["a", "d"]);
  });

  it("refuses bad options with the offending param and creates nothing", async () => {
    const other = await makeTeam();
    const foreign = (await makeDeployment(other)).name;
    const cases: [Options, string][] = [
      [{ format: "csv" }, "format"],
      [{ compression: "zip" }, "compression"],
      [{ format: "parquet", compression: "gzip" }, "compression"],
      [{ split: { validation: 0, seed: 1 } }, "split.validation"],
      [{ split: { validation: 1, seed: 1 } }, "split.validation"],
      [{ split: { validation: 1.5, seed: 1 } }, "split.validation"],
      [{ split: { validation: 0.2 } }, "split.seed"],
      [{ split: 0.2 }, "split"],
      [{ dedupe: "yes" }, "dedupe"],
      [{ validate: "anthropic" }, "validate"],
      [{ tokenizer: "no-such-deployment" }, "tokenizer"],
      [{ tokenizer: foreign }, "tokenizer"],
      [{ tokenizer: "Bad Name" }, "tokenizer"],
      [{ maxTokens: 100 }, "maxTokens"],
      [{ tokenizer: "$dep", maxTokens: 0 }, "maxTokens"],
      [{ filter: { format: "jsonl" } }, "filter.format"],
    ];
    const before = (await api.get("/v1/datasets/list")).json.length;
    for (const [given, param] of cases) {
      const options = Object.fromEntries(Object.entries(given).map(([k, v]) => [k, v === "$dep" ? deployment : v]));
      const res = await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, { name: "bad-options", ...options });
      expect(res.status, JSON.stringify(options)).toBe(400);
      expect(res.json.error, JSON.stringify(options)).toMatchObject({ type: "invalid_request", param });
    }
    expect((await api.get("/v1/datasets/list")).json.length).toBe(before);
  });
});

describe("split side in SQL", () => {
  const ids = [...Array.from({ length: 3000 }, () => newId("sample")), "smp_ünïcødé_✓", "", "a:b:c"];
  it("Postgres puts every id on the side the documented formula (side, above) gives: the packager reads it from the COPY", async () => {
    for (const split of [
      { validation: 0.3, seed: 9 },
      { validation: 0.1, seed: 0 },
      { validation: 0.999999, seed: Number.MAX_SAFE_INTEGER },
      { validation: 1e-7, seed: 42 },
      { validation: 0.5, seed: 12345678901 },
    ]) {
      const rows = await db().db.execute<{ id: string; side: number }>(
        sql`select s.id, ${splitSideSql(split)} as side from unnest(${`{${ids.map((i) => `"${i}"`).join(",")}}`}::text[]) as s(id)`,
      );
      const got = new Map(rows.map((r) => [r.id, Number(r.side) === 1]));
      expect(got.size).toBe(ids.length);
      if (split.validation === 0.3) {
        const share = [...got.values()].filter(Boolean).length / ids.length;
        expect(share).toBeGreaterThan(0.25);
        expect(share).toBeLessThan(0.35);
      }
      for (const id of ids)
        expect(got.get(id), `${id} with ${JSON.stringify(split)}`).toBe(side(id, split) === "validation");
    }
  });

  it("agrees at the boundary: a fraction exactly at an id's 6 bytes, just above, and between two values", async () => {
    const seed = 5;
    for (const id of ids.slice(0, 20)) {
      const v = createHash("sha256").update(`${seed}:${id}`).digest().readUIntBE(0, 6);
      for (const validation of [v / 2 ** 48, (v + 1) / 2 ** 48, (v + 0.5) / 2 ** 48, (v - 0.5) / 2 ** 48]) {
        if (validation <= 0) continue;
        const split = { validation, seed };
        const [row] = await db().db.execute<{ side: number }>(
          sql`select ${splitSideSql(split)} as side from (select ${id}::text as id) s`,
        );
        expect(Number(row!.side) === 1, `${id} at ${validation}`).toBe(side(id, split) === "validation");
        expect(side(id, split)).toBe(validation > v / 2 ** 48 ? "validation" : "train");
      }
    }
  });
});

describe("tools and weights (OpenAI's chat fine-tuning lines)", () => {
  const tools = [
    {
      type: "function",
      function: {
        name: "get_weather",
        description: "The weather in a city",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      },
    },
  ];
  const withTools = {
    messages: [
      { role: "user", content: "Weather in Oslo?" },
      { role: "assistant", content: "Let me look.", weight: 0 },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }],
      },
      { role: "tool", tool_call_id: "c1", content: "-3" },
      { role: "assistant", content: "It is -3.", weight: 1 },
    ],
    tools,
  };

  it("are stored, imported, and written to JSONL and Parquet as given", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    const p = (await api.post("/v1/pipelines/create", { name: "tools" })).json.id as string;
    // Before: 400, unrecognized keys "tools" and "weight" (an OpenAI fine-tuning file refused line by line).
    const added = await api.post(`/v1/pipelines/${p}/add`, withTools);
    expect(added.status, added.text).toBe(200);
    const plain = { messages: conv(["user", "Hi"], ["assistant", "Hello"]) };
    expect((await api.post(`/v1/pipelines/${p}/add`, plain)).status).toBe(200);
    const imported = await api.post(`/v1/pipelines/${p}/import`, JSON.stringify(withTools) + "\n", {
      "content-type": "application/x-ndjson",
    });
    expect(imported.status).toBe(202);
    await expect
      .poll(async () => (await api.get(`/v1/imports/${imported.json.id}`)).json.imported, { timeout: 30_000 })
      .toBe(1);
    // Refused as a tool must be: a parameters key __proto__, a tool without a name.
    for (const bad of [
      { ...withTools, tools: [{ type: "function", function: { name: "" } }] },
      { ...withTools, tools: [] },
      { messages: [{ role: "assistant", content: "x", weight: 2 }] },
    ]) {
      const res = await api.post(`/v1/pipelines/${p}/add`, bad);
      expect(res.status, JSON.stringify(bad)).toBe(400);
    }

    const jsonl = await api.post(`/v1/pipelines/${p}/create-dataset`, { name: "tools-jsonl" });
    const lines = parseLines(await download(api, (await waitForStatus(api, jsonl.json.id, "READY")).id));
    expect(lines).toEqual([withTools, plain, withTools]);

    const pq = await api.post(`/v1/pipelines/${p}/create-dataset`, { name: "tools-parquet", format: "parquet" });
    const rows = await parquetReadObjects({
      file: new Uint8Array(await downloadBytes(api, (await waitForStatus(api, pq.json.id, "READY")).id)).buffer,
    });
    expect(rows.map((r) => (r.tools === null || r.tools === undefined ? null : JSON.parse(r.tools as string)))).toEqual(
      [tools, null, tools],
    );
    expect((rows[0]!.messages as { weight: number | null }[]).map((m) => m.weight)).toEqual([null, 0, null, null, 1]);
  });
});
