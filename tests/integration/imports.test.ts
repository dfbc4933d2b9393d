import { gzipSync } from "node:zlib";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { ImportSchema } from "@/lib/contracts/imports";
import { imports } from "@/lib/db/schema";
import { newId } from "@/lib/ids";
import { setTeamLimits } from "@/lib/services/teams";
import { baseUrl, client, db, makeTeam } from "../helpers/context";
import { jsonl, NDJSON, waitForImport } from "../helpers/imports";
import { expectDocumented } from "../helpers/openapi";

async function setup() {
  const key = (await makeTeam()).apiKey;
  const api = client(key);
  const pipeline = (await api.post("/v1/pipelines/create", { name: "import" })).json.id as string;
  return {
    key,
    api,
    pipeline,
    count: async (b: object = {}) => (await api.post(`/v1/pipelines/${pipeline}/count`, b)).json.count,
  };
}

describe("imports", () => {
  it("imports 100,000 lines, refusing some with their line numbers, with progress while it runs", async () => {
    const { api, pipeline, count } = await setup();
    const total = 100_000;
    const { text, refused } = jsonl(total, 997);
    const res = await api.post(`/v1/pipelines/${pipeline}/import`, text, NDJSON);
    expect(res.status, res.text).toBe(202);
    await expectDocumented("POST", "/v1/pipelines/{id}/import", res);
    const created = ImportSchema.strict().parse(res.json);
    expect(created).toMatchObject({ status: "PROCESSING", pipelineId: pipeline, bytes: Buffer.byteLength(text) });
    expect(created.id).toMatch(/^imp_/);

    const { done, seen } = await waitForImport(api, created.id);
    expect(done).toMatchObject({
      linesRead: total,
      imported: total - refused.length,
      refused: refused.length,
      bytesRead: Buffer.byteLength(text),
      error: null,
    });
    // Progress is visible while it runs, and never goes backwards.
    expect(seen.some((s) => s.status === "PROCESSING" && s.linesRead > 0 && s.linesRead < total)).toBe(true);
    for (let i = 1; i < seen.length; i++) expect(seen[i]!.linesRead).toBeGreaterThanOrEqual(seen[i - 1]!.linesRead);
    expect(done.refusals).toHaveLength(100);
    expect(done.refusals.map((r) => r.line)).toEqual(refused.slice(0, 100));
    expect(done.refusals[0]!.error).toMatchObject({ type: "invalid_request", param: "messages[0].role" });
    expect(done.refusals[1]!.error.message).toMatch(/not valid JSON/);
    await expectDocumented("GET", "/v1/imports/{id}", await api.get(`/v1/imports/${created.id}`));

    expect(await count()).toBe(total - refused.length);
    // In line order, each line stored once.
    const first = (
      await api.post(`/v1/pipelines/${pipeline}/samples`, { limit: 3, metadata: { line: { $prefix: "1" } } })
    ).json as { metadata: { line: string } }[];
    expect(first.map((s) => s.metadata.line)).toEqual(["1", "10", "11"]);
    expect(await count({ metadata: { line: "12345" } })).toBe(1);
    expect(await count({ metadata: { line: String(refused[0]) } })).toBe(0);
  }, 240_000);

  it("skips blank lines, refuses long lines and bad UTF-8, and takes a last line without a newline", async () => {
    const { key, api, pipeline, count } = await setup();
    const ok = (c: string) => JSON.stringify({ messages: [{ role: "user", content: c }] });
    const body = Buffer.concat([
      Buffer.from(`${ok("a")}\r\n\n   \n`),
      Buffer.from(JSON.stringify({ messages: [{ role: "user", content: "x".repeat(1024 * 1024 + 5) }] }) + "\n"),
      Buffer.from([0x7b, 0xff, 0xfe, 0x7d, 0x0a]),
      Buffer.from(`${ok("nul\u0000")}\n${ok("b")}`),
    ]);
    const created = await fetch(`${baseUrl}/v1/pipelines/${pipeline}/import`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/x-ndjson; charset=utf-8" },
      body,
    });
    expect(created.status).toBe(202);
    const { done } = await waitForImport(api, ((await created.json()) as { id: string }).id);
    expect(done).toMatchObject({ linesRead: 7, imported: 2, refused: 3 });
    expect(done.refusals.map((r) => [r.line, r.error.type, r.error.param ?? null])).toEqual([
      [4, "payload_too_large", null],
      [5, "invalid_request", null],
      [6, "invalid_request", "messages[0].content"],
    ]);
    expect(await count()).toBe(2);
  });

  it("takes a gzipped file, labelled Content-Encoding: gzip or not, and stores it decompressed", async () => {
    const { key, api, pipeline, count } = await setup();
    const { text, refused } = jsonl(5_000, 499);
    const post = (body: Buffer, headers: Record<string, string> = {}) =>
      fetch(`${baseUrl}/v1/pipelines/${pipeline}/import`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, ...NDJSON, ...headers },
        body: new Uint8Array(body),
      });
    for (const headers of [{}, { "content-encoding": "gzip" }] as Record<string, string>[]) {
      const created = await post(gzipSync(text), headers);
      expect(created.status).toBe(202);
      const { done } = await waitForImport(api, ((await created.json()) as { id: string }).id);
      expect(done).toMatchObject({
        status: "READY",
        bytes: Buffer.byteLength(text),
        linesRead: 5_000,
        imported: 5_000 - refused.length,
        refused: refused.length,
      });
      expect(done.refusals.map((r) => r.line)).toEqual(refused);
    }
    expect(await count()).toBe(2 * (5_000 - refused.length));
    // Not gzip after all, or another encoding: 400, nothing stored.
    const broken = Buffer.concat([gzipSync(text).subarray(0, 200), Buffer.from("not the rest")]);
    const bad = await post(broken);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { param: string } }).error.param).toBe("body");
    const br = await post(Buffer.from(text), { "content-encoding": "br" });
    expect(br.status).toBe(400);
    expect(((await br.json()) as { error: { param: string } }).error.param).toBe("Content-Encoding");
    expect(await count()).toBe(2 * (5_000 - refused.length));
  });

  it("refuses other content types and unknown or other teams' pipelines before reading the body", async () => {
    const { api, pipeline, count } = await setup();
    const other = await setup();
    const line = JSON.stringify({ messages: [{ role: "user", content: "x" }] });
    const wrong = await api.post(`/v1/pipelines/${pipeline}/import`, line, { "content-type": "application/json" });
    expect(wrong.status).toBe(400);
    expect(wrong.json.error.param).toBe("Content-Type");
    for (const target of [other.pipeline, "pipe_00000000000000000000"]) {
      const res = await api.post(`/v1/pipelines/${target}/import`, line, NDJSON);
      expect(res.status).toBe(404);
    }
    const unknown = await api.get("/v1/imports/imp_00000000000000000000");
    expect(unknown.status).toBe(404);
    await expectDocumented("GET", "/v1/imports/{id}", unknown);
    // Empty: READY with nothing read.
    const empty = await api.post(`/v1/pipelines/${pipeline}/import`, "", NDJSON);
    expect(empty.status).toBe(202);
    expect((await waitForImport(api, empty.json.id)).done).toMatchObject({ linesRead: 0, imported: 0, bytes: 0 });
    expect(await count()).toBe(0);
    expect(await other.count()).toBe(0);
    // The pipeline deleted: its imports are gone too, as everything of it (404 everywhere).
    expect((await api.call("DELETE", `/v1/pipelines/${pipeline}`)).status).toBe(200);
    const gone = await api.get(`/v1/imports/${empty.json.id}`);
    expect(gone.status).toBe(404);
    expect(gone.json.error.message).toBe(`No import with id '${empty.json.id}'.`);
  });

  it("refuses an upload past the team's imports waiting or running (importJobs) before reading it", async () => {
    const team = await makeTeam();
    await setTeamLimits(db().db, { teamId: team.id, limits: { importJobs: 2 } });
    const api = client(team.apiKey);
    const pipeline = (await api.post("/v1/pipelines/create", { name: "quota" })).json.id as string;
    // Two imports another worker holds (their leases far off): the team's two places.
    for (let i = 0; i < 2; i++)
      await db()
        .db.insert(imports)
        .values({
          id: newId("import"),
          teamId: team.id,
          pipelineId: pipeline,
          blobKey: `imports/held-${i}/upload.jsonl`,
          bytes: 10,
          leaseOwner: "elsewhere",
          leaseExpiresAt: new Date(Date.now() + 3600_000),
        });
    const line = JSON.stringify({ messages: [{ role: "user", content: "x" }] });
    const res = await api.post(`/v1/pipelines/${pipeline}/import`, line, NDJSON);
    expect(res.status).toBe(429);
    expect(res.json.error).toMatchObject({
      type: "rate_limited",
      message: expect.stringMatching(/2 imports.*limit 2/),
    });
    expect(res.headers.get("retry-after")).toMatch(/^\d+$/);
    await expectDocumented("POST", "/v1/pipelines/{id}/import", res);
    const mine = await db().db.select().from(imports);
    expect(mine.filter((r) => r.teamId === team.id)).toHaveLength(2); // nothing created
    // Another team is not held back by this one's.
    const other = await setup();
    expect((await other.api.post(`/v1/pipelines/${other.pipeline}/import`, line, NDJSON)).status).toBe(202);
  });

  it("lists a team's imports, cancels a PROCESSING one, and finds (and deletes) an import's samples by importId", async () => {
    const { api, pipeline, count } = await setup();
    const other = await setup();
    const { text } = jsonl(300);
    const done = (await waitForImport(api, (await api.post(`/v1/pipelines/${pipeline}/import`, text, NDJSON)).json.id))
      .done;
    expect(done.imported).toBe(300);
    await api.post("/v1/pipelines/" + pipeline + "/add", { messages: [{ role: "user", content: "added" }] });
    // A PROCESSING import another worker holds (its lease far off), as one cancelled midway.
    const held = newId("import");
    await db()
      .db.insert(imports)
      .values({
        id: held,
        teamId: (await api.get(`/v1/pipelines/${pipeline}`)).json.teamId,
        pipelineId: pipeline,
        blobKey: `imports/${held}/upload.jsonl`,
        bytes: 10,
        leaseOwner: "elsewhere",
        leaseExpiresAt: new Date(Date.now() + 3600_000),
      });

    const listed = await api.get("/v1/imports/list");
    expect(listed.status, listed.text).toBe(200);
    await expectDocumented("GET", "/v1/imports/list", listed);
    expect(listed.json.map((i: { id: string }) => i.id)).toEqual([held, done.id]);
    const page = await api.get(`/v1/imports/list?limit=1&before=${held}&pipelineId=${pipeline}&status=READY`);
    expect(page.json.map((i: { id: string }) => i.id)).toEqual([done.id]);
    expect((await other.api.get("/v1/imports/list")).json).toEqual([]);
    for (const [query, param] of [
      ["limit=0", "limit"],
      ["limit=x", "limit"],
      ["status=DONE", "status"],
      ["before=imp_00000000000000000000", "before"],
      ["color=red", "color"],
    ]) {
      const bad = await api.get(`/v1/imports/list?${query}`);
      expect(bad.status, query).toBe(400);
      expect(bad.json.error.param, query).toBe(param);
    }
    const foreign = await other.api.get(`/v1/imports/list?pipelineId=${pipeline}`);
    expect(foreign.status).toBe(404);
    await expectDocumented("GET", "/v1/imports/list", foreign);

    // Cancel: another team's id is a 404, a READY import a 409, the held one becomes CANCELLED.
    expect((await other.api.post(`/v1/imports/${held}/cancel`)).status).toBe(404);
    const ready = await api.post(`/v1/imports/${done.id}/cancel`);
    expect(ready.status).toBe(409);
    expect(ready.json.error.message).toMatch(/already READY/);
    await expectDocumented("POST", "/v1/imports/{id}/cancel", ready);
    const cancelled = await api.post(`/v1/imports/${held}/cancel`);
    expect(cancelled.status, cancelled.text).toBe(200);
    await expectDocumented("POST", "/v1/imports/{id}/cancel", cancelled);
    expect(ImportSchema.strict().parse(cancelled.json).status).toBe("CANCELLED");
    expect((await api.post(`/v1/imports/${held}/cancel`)).json.status).toBe("CANCELLED");
    const row = (await db().db.select().from(imports).where(eq(imports.id, held)))[0]!;
    expect(row).toMatchObject({ status: "CANCELLED", leaseOwner: null, fileRemoved: true });

    // An import's samples: counted and deleted by importId, the added one left.
    expect(await count({ importId: done.id })).toBe(300);
    expect(await count({ importId: held })).toBe(0);
    expect(await count()).toBe(301);
    const deleted = await api.post(`/v1/pipelines/${pipeline}/delete-samples`, { importId: done.id });
    expect(deleted.json).toEqual({ deleted: 300 });
    expect(await count()).toBe(1);
  });
});
