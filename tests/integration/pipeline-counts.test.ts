import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import postgres from "postgres";
import { describe, expect, inject, it } from "vitest";
import { SelectionBody } from "@/lib/contracts/pipelines";
import { connect } from "@/lib/db/client";
import { migrateDatabase, migrationsFolder } from "@/lib/db/migrate";
import { newId } from "@/lib/ids";
import { filteredCount } from "@/lib/services/selection-query";
import { client, db, makeTeam } from "../helpers/context";

// Each pipeline's number of samples is kept by Postgres (pipeline_sample_counts, statement
// triggers on samples): a count that filters nothing, and the `$ne` / `$exists: false` counts
// taken as differences from it, read that instead of every sample. It must follow every way
// samples come and go, whoever writes them.

/** The selection that filters nothing. */
const everything = SelectionBody.parse({});

const msg = (content: string) => [{ role: "user", content }];

async function setup() {
  const team = await makeTeam();
  const api = client(team.apiKey);
  const pipeline = (await api.post("/v1/pipelines/create", { name: "counted" })).json.id as string;
  const count = async (body: object = {}) => {
    const res = await api.post(`/v1/pipelines/${pipeline}/count`, body);
    expect(res.status, res.text).toBe(200);
    return res.json.count as number;
  };
  /** What the samples table holds, counted the slow way. */
  const stored = async () =>
    (
      await db().db.execute<{ n: number }>(sql`select count(*)::int as n from samples where pipeline_id = ${pipeline}`)
    )[0]!.n;
  const kept = async () =>
    (
      await db().db.execute<{ n: number | null }>(
        sql`select sum(n)::int as n from pipeline_sample_counts where pipeline_id = ${pipeline}`,
      )
    )[0]!.n;
  return { team, api, pipeline, count, stored, kept };
}

/** Rows written the way psql or a bulk load would: straight into the table, many per statement. */
async function insertDirectly(teamId: string, pipeline: string, n: number) {
  const rows = Array.from({ length: n }, (_, i) => ({
    id: newId("sample"),
    content: `direct ${i}`,
  }));
  await db().db.execute(sql`
    insert into samples (id, pipeline_id, team_id, messages, length)
    select r.id, ${pipeline}, ${teamId}, jsonb_build_array(jsonb_build_object('role', 'user', 'content', r.content)), 1
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as r(id text, content text)`);
  return rows.map((r) => r.id);
}

describe("a pipeline's kept sample count", () => {
  it("follows add, add-batch, concurrent adds, rows written directly and deletions", async () => {
    const { team, api, pipeline, count, stored, kept } = await setup();
    expect(await count()).toBe(0);

    expect((await api.post(`/v1/pipelines/${pipeline}/add`, { messages: msg("one") })).status).toBe(200);
    const batch = await api.post(`/v1/pipelines/${pipeline}/add-batch`, {
      samples: Array.from({ length: 30 }, (_, i) => ({
        messages: msg(`b${i}`),
        metadata: { lang: i % 3 ? "en" : "fr" },
      })),
    });
    expect(batch.status, batch.text).toBe(200);
    // Many connections at once: each adds to its own backend's shard, and nothing is lost.
    const concurrent = await Promise.all(
      Array.from({ length: 24 }, (_, i) => api.post(`/v1/pipelines/${pipeline}/add`, { messages: msg(`c${i}`) })),
    );
    expect(concurrent.map((r) => r.status)).toEqual(Array(24).fill(200));
    const direct = await insertDirectly(team.id, pipeline, 15);
    expect(await stored()).toBe(70);
    expect(await kept()).toBe(70);
    expect(await count()).toBe(70);
    // The differences from it: the 20 "en" of the batch are the only samples with lang "en".
    expect(await count({ metadata: { lang: { $ne: "en" } } })).toBe(50);
    expect(await count({ metadata: { lang: { $exists: false } } })).toBe(40);

    // Deleting through the API, then straight in the table.
    const del = await api.post(`/v1/pipelines/${pipeline}/delete-samples`, { metadata: { lang: "fr" } });
    expect(del.status, del.text).toBe(200);
    await db().db.execute(sql`delete from samples where id = any(${`{${direct.slice(0, 5).join(",")}}`}::text[])`);
    expect(await stored()).toBe(55);
    expect(await kept()).toBe(55);
    expect(await count()).toBe(55);
    expect(await count({ metadata: { lang: { $ne: "en" } } })).toBe(35);
  });

  it("a rolled-back insert counts nothing", async () => {
    const { team, pipeline, count } = await setup();
    await insertDirectly(team.id, pipeline, 3);
    await expect(
      db().db.transaction(async (tx) => {
        await tx.execute(sql`
          insert into samples (id, pipeline_id, team_id, messages, length)
          values (${newId("sample")}, ${pipeline}, ${team.id}, '[{"role":"user","content":"x"}]', 1)`);
        throw new Error("roll back");
      }),
    ).rejects.toThrow("roll back");
    expect(await count()).toBe(3);
  });

  it("up to a bound (a dataset's frozen selection), samples added after it are left out", async () => {
    const { team, pipeline } = await setup();
    const first = await insertDirectly(team.id, pipeline, 8);
    const [bound] = await db().db.execute<{ created_at: string; id: string }>(sql`
      select created_at::text, id from samples where pipeline_id = ${pipeline} order by created_at desc, id desc limit 1`);
    await insertDirectly(team.id, pipeline, 5);
    const within = { createdAt: bound!.created_at, sampleId: bound!.id };
    expect(first).toContain(bound!.id);
    expect(await filteredCount(db().db, pipeline, everything, within)).toBe(8);
    expect(await filteredCount(db().db, pipeline, everything)).toBe(13);
  });

  it("goes with its pipeline when the pipeline is purged", async () => {
    const { team, pipeline, kept } = await setup();
    await insertDirectly(team.id, pipeline, 4);
    expect(await kept()).toBe(4);
    await db().db.execute(sql`delete from pipelines where id = ${pipeline}`);
    const [rows] = await db().db.execute<{ n: number }>(
      sql`select count(*)::int as n from pipeline_sample_counts where pipeline_id = ${pipeline}`,
    );
    expect(rows!.n).toBe(0);
  });
});

describe("the migration that adds the kept counts", () => {
  it("counts the samples stored before it (and a TRUNCATE empties them)", async () => {
    // A database migrated up to the migration before, with samples in it, then migrated on.
    const adminUrl = inject("adminDatabaseUrl");
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    const name = `lmp_counts_${process.pid}_${Date.now()}`;
    const folder = mkdtempSync(path.join(os.tmpdir(), "lmp-migrations-"));
    await admin.unsafe(`create database ${name}`);
    try {
      const url = new URL(adminUrl);
      url.pathname = `/${name}`;
      cpSync(migrationsFolder, folder, { recursive: true });
      const journalPath = path.join(folder, "meta", "_journal.json");
      const journal = JSON.parse(readFileSync(journalPath, "utf8")) as { entries: { tag: string }[] };
      const at = journal.entries.findIndex((e) => e.tag === "0013_pipeline_sample_counts");
      expect(at).toBeGreaterThan(0);
      writeFileSync(journalPath, JSON.stringify({ ...journal, entries: journal.entries.slice(0, at) }));
      await migrateDatabase(url.toString(), folder);

      const handle = connect(url.toString(), { max: 1 });
      try {
        await handle.db.execute(sql`insert into teams (id, slug, name) values ('team_m', 'm', 'm')`);
        for (const p of ["pipe_m1", "pipe_m2"])
          await handle.db.execute(sql`insert into pipelines (id, team_id, name) values (${p}, 'team_m', ${p})`);
        await handle.db.execute(sql`
          insert into samples (id, pipeline_id, team_id, messages, length)
          select 'smp_m' || g, case when g <= 7 then 'pipe_m1' else 'pipe_m2' end, 'team_m', '[]', 0
          from generate_series(1, 10) g`);
        await migrateDatabase(url.toString());
        const counts = await handle.db.execute<{ pipeline_id: string; n: number }>(sql`
          select pipeline_id, sum(n)::int as n from pipeline_sample_counts group by 1 order by 1`);
        expect([...counts]).toEqual([
          { pipeline_id: "pipe_m1", n: 7 },
          { pipeline_id: "pipe_m2", n: 3 },
        ]);
        expect(await filteredCount(handle.db, "pipe_m1", everything)).toBe(7);
        // A TRUNCATE (no row triggers) empties every pipeline's count too.
        await handle.db.execute(sql`truncate samples`);
        expect(await filteredCount(handle.db, "pipe_m1", everything)).toBe(0);
        expect(await filteredCount(handle.db, "pipe_m2", everything)).toBe(0);
      } finally {
        await handle.close();
      }
    } finally {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
      rmSync(folder, { recursive: true, force: true });
    }
  });
});
