import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { connect, type DbHandle } from "@/lib/db/client";
import { imports } from "@/lib/db/schema";
import { createApiKey } from "@/lib/services/api-keys";
import { createTeam } from "@/lib/services/teams";
import { jsonl, NDJSON, waitForImport } from "../helpers/imports";
import { scratchDatabase } from "../helpers/scratch-database";
import { startApp, startWorker } from "../setup/global-setup";

// An app and workers of their own on a database of their own (the suite's worker would otherwise
// take the imports): a worker killed in the middle of an import, and a small IMPORT_MAX_BYTES.

const authSecret = "test-secret-0123456789-0123456789-abcdef";
let database: Awaited<ReturnType<typeof scratchDatabase>>;
let handle: DbHandle;
let dataDir: string;
let app: Awaited<ReturnType<typeof startApp>>;
const children: ChildProcess[] = [];

beforeAll(async () => {
  database = await scratchDatabase();
  handle = connect(database.url, { max: 2 });
  dataDir = mkdtempSync(path.join(os.tmpdir(), "lmp-imp-"));
  app = await startApp({
    DATABASE_URL: database.url,
    AUTH_SECRET: authSecret,
    DATA_DIR: dataDir,
    IMPORT_MAX_BYTES: "3200000",
  });
  children.push(app.child);
});
afterAll(async () => {
  for (const child of children) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
  }
  await handle?.close();
  await database?.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function worker(env: Record<string, string>) {
  const w = await startWorker({
    DATABASE_URL: database.url,
    AUTH_SECRET: authSecret,
    DATA_DIR: dataDir,
    WORKER_MODELS: "",
    IMPORT_POLL_MS: "100",
    IMPORT_LEASE_SECONDS: "2",
    IMPORT_CHUNK_LINES: "500",
    ...env,
  });
  children.push(w.child);
  onTestFailed(() => console.log(`worker logs:\n${w.logs.join("")}`));
  return w;
}

/** A client of this file's app. */
function api(key: string) {
  const call = async (method: string, p: string, body?: string, headers: Record<string, string> = {}) => {
    const res = await fetch(app.url + p, {
      method,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
      body,
    });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : undefined };
  };
  return {
    get: (p: string) => call("GET", p),
    post: (p: string, body: string, headers?: Record<string, string>) => call("POST", p, body, headers),
  };
}

async function team() {
  const t = await createTeam(handle.db, {
    slug: `t-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`,
  });
  const key = (await createApiKey(handle.db, { teamId: t.id, kind: "api" })).secret;
  const client = api(key);
  const pipeline = (await client.post("/v1/pipelines/create", JSON.stringify({ name: "imports" }))).json.id as string;
  return { key, client, pipeline };
}

describe("imports by worker processes", () => {
  it("finishes an import interrupted by a worker killed midway exactly once", async () => {
    const { client, pipeline } = await team();
    const total = 20_000;
    const { text, refused } = jsonl(total, 101);
    const res = await client.post(`/v1/pipelines/${pipeline}/import`, text, NDJSON);
    expect(res.status).toBe(202);
    const id = res.json.id as string;
    // 40 chunks, 150 ms each: the first worker is killed after a few of them.
    const first = await worker({ IMPORT_THROTTLE_MS: "150" });
    await expect
      .poll(async () => (await handle.db.select().from(imports).where(eq(imports.id, id)))[0]!.linesRead, {
        timeout: 30_000,
        interval: 20,
      })
      .toBeGreaterThanOrEqual(2000);
    first.child.kill("SIGKILL");
    await new Promise((r) => first.child.once("exit", r));
    const midway = (await handle.db.select().from(imports).where(eq(imports.id, id)))[0]!;
    expect(midway.status).toBe("PROCESSING");
    expect(midway.linesRead).toBeLessThan(total);
    const storedMidway = await handle.db.execute<{ n: number }>(
      sql`select count(*)::int as n from samples where pipeline_id = ${pipeline}`,
    );
    // The progress and the samples committed together.
    expect(storedMidway[0]!.n).toBe(midway.imported);

    await worker({});
    const { done } = await waitForImport(client, id);
    expect(done).toMatchObject({ linesRead: total, imported: total - refused.length, refused: refused.length });
    expect(done.refusals.map((r) => r.line)).toEqual(refused.slice(0, 100));
    const [counts] = await handle.db.execute<{ n: number; lines: number }>(sql`
      select count(*)::int as n, count(distinct metadata->>'line')::int as lines from samples where pipeline_id = ${pipeline}`);
    expect(counts).toEqual({ n: total - refused.length, lines: total - refused.length });
    // Two claims; the second stored chunks, so its count started over: one attempt against the limit.
    const attempts = (await handle.db.select().from(imports).where(eq(imports.id, id)))[0]!.attempts;
    expect(attempts).toBe(1);
  }, 180_000);

  it("answers 413 past IMPORT_MAX_BYTES and keeps nothing of the upload", async () => {
    const { key, client, pipeline } = await team();
    const { text } = jsonl(30_000);
    expect(Buffer.byteLength(text)).toBeGreaterThan(3_200_000);
    const res = await client.post(`/v1/pipelines/${pipeline}/import`, text, NDJSON);
    expect(res.status).toBe(413);
    expect(res.json.error.type).toBe("payload_too_large");
    // Without Content-Length (chunked), the limit is enforced while the body streams in.
    const bytes = new TextEncoder().encode(text);
    const chunked = await fetch(`${app.url}/v1/pipelines/${pipeline}/import`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, ...NDJSON },
      body: new ReadableStream({
        start(c) {
          for (let i = 0; i < bytes.length; i += 65536) c.enqueue(bytes.slice(i, i + 65536));
          c.close();
        },
      }),
      duplex: "half",
    } as RequestInit);
    // The app answers 413 mid-upload and discards the rest (within bounds): the client sees the
    // answer, not a reset connection.
    expect(chunked.status).toBe(413);
    // Gzipped, the limit counts what the body decompresses to (about 70 kB here).
    const gzipped = gzipSync(text);
    expect(gzipped.length).toBeLessThan(3_200_000);
    const zipped = await fetch(`${app.url}/v1/pipelines/${pipeline}/import`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, ...NDJSON },
      body: new Uint8Array(gzipped),
    });
    expect(zipped.status).toBe(413);
    expect((await handle.db.select().from(imports)).filter((i) => i.pipelineId === pipeline)).toEqual([]);
  });
});
