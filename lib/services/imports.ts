import { Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import { and, desc, eq, isNull, sql } from "drizzle-orm";
import type { BlobStore } from "../blob";
import type { ImportDto, ImportListQuery } from "../contracts/imports";
import type { DbOrTx } from "../db/client";
import { imports, pipelines, type Import } from "../db/schema";
import { conflict, invalidRequest, notFound, payloadTooLarge, rateLimited } from "../errors";
import { newId } from "../ids";
import { getPipeline, holdLivePipeline } from "./pipelines";
import { removeImportFile } from "./import-jobs";

/**
 * Imports of JSONL files into a pipeline (docs/api.md "Imports"): the API side. The upload is
 * streamed into the blob store (never held in memory) and only then is the PROCESSING row
 * inserted, so a worker that claims it always finds the whole file (import-jobs.ts).
 */
export const importBlobPrefix = (importId: string) => `imports/${importId}/`;

export function toImportDto(row: Import): ImportDto {
  return {
    id: row.id,
    pipelineId: row.pipelineId,
    teamId: row.teamId,
    status: row.status,
    bytes: row.bytes,
    bytesRead: row.bytesRead,
    linesRead: row.linesRead,
    imported: row.imported,
    refused: row.refused,
    refusals: row.refusals,
    error: row.error,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/**
 * Imports a team may have waiting or running at once (its `importJobs` limit), checked before the
 * body is read: each holds its uploaded file (up to IMPORT_MAX_BYTES, decompressed) in the blob
 * store until a worker is done with it, so one team's hundreds of uploads filled the disk every
 * team (and the embedded database) shares. 429 with Retry-After; concurrent uploads may overshoot
 * by a few.
 */
export async function assertImportQuota(db: DbOrTx, teamId: string, limit: number): Promise<void> {
  const [row] = await db.execute<{ n: number }>(
    sql`select count(*)::int as n from imports where team_id = ${teamId} and status = 'PROCESSING'`,
  );
  const n = row?.n ?? 0;
  if (n >= limit)
    throw rateLimited(
      `This team already has ${n} imports waiting or running (limit ${limit}); retry when one is READY or FAILED.`,
      { "retry-after": "10" },
    );
}

/**
 * Stores the uploaded body (413 past `maxBytes`, leaving nothing behind) and creates the import.
 * A gzipped body (a `.jsonl.gz` file, or `Content-Encoding: gzip`) is stored decompressed, and
 * `maxBytes` counts what it decompresses to. The pipeline must be the caller's (checked by the
 * route before the body is read).
 */
export async function createImport(
  db: DbOrTx,
  blobs: BlobStore,
  input: {
    teamId: string;
    pipelineId: string;
    body: AsyncIterable<Uint8Array>;
    maxBytes: number;
    /** The team's `importJobs`: imports it may have PROCESSING (each holding its file) at once. */
    maxRunning: number;
  },
): Promise<Import> {
  await assertImportQuota(db, input.teamId, input.maxRunning);
  const id = newId("import");
  const key = `${importBlobPrefix(id)}upload.jsonl`;
  let bytes = 0;
  async function* counted(): AsyncGenerator<Uint8Array> {
    for await (const chunk of gunzipped(input.body)) {
      bytes += chunk.byteLength;
      if (bytes > input.maxBytes) throw payloadTooLarge(input.maxBytes);
      yield chunk;
    }
  }
  await blobs.put(key, counted(), { contentType: "application/x-ndjson" });
  try {
    // The pipeline may have been deleted (even purged) during the upload: then 404, file removed.
    return await db.transaction(async (tx) => {
      await holdLivePipeline(tx, { teamId: input.teamId, id: input.pipelineId });
      const [row] = await tx
        .insert(imports)
        .values({ id, teamId: input.teamId, pipelineId: input.pipelineId, blobKey: key, bytes })
        .returning();
      return row!;
    });
  } catch (err) {
    await blobs.removePrefix(importBlobPrefix(id)).catch(() => {});
    throw err;
  }
}

/** One import of the team; another team's is not found, nor one of a deleted pipeline (404 everywhere). */
export async function getImport(db: DbOrTx, input: { teamId: string; id: string }): Promise<Import> {
  const [row] = await db
    .select({ i: imports })
    .from(imports)
    .innerJoin(pipelines, eq(pipelines.id, imports.pipelineId))
    .where(and(eq(imports.id, input.id), eq(imports.teamId, input.teamId), isNull(pipelines.deletedAt)));
  if (!row) throw notFound(`No import with id '${input.id}'.`, "id");
  return row.i;
}

/**
 * The team's imports, newest first (imports of deleted pipelines are gone, as everywhere):
 * `pipelineId` (its pipeline's, 404 when it is not the team's), `status`, and `before` (the last
 * id of the previous page; 400 when it is not one of the team's imports).
 */
export async function listImports(db: DbOrTx, input: { teamId: string } & ImportListQuery): Promise<Import[]> {
  const where = [eq(imports.teamId, input.teamId), isNull(pipelines.deletedAt)];
  if (input.pipelineId !== undefined) {
    await getPipeline(db, { teamId: input.teamId, id: input.pipelineId });
    where.push(eq(imports.pipelineId, input.pipelineId));
  }
  if (input.status !== undefined) where.push(eq(imports.status, input.status));
  if (input.before !== undefined) {
    const [after] = await db
      .select({ createdAt: imports.createdAt, id: imports.id })
      .from(imports)
      .where(and(eq(imports.id, input.before), eq(imports.teamId, input.teamId)));
    if (!after) throw invalidRequest(`No import with id '${input.before}' to continue after.`, "before");
    // Compared in SQL, at the column's microseconds: a JavaScript Date keeps milliseconds, and
    // imports created within the same millisecond were skipped.
    where.push(
      sql`(${imports.createdAt}, ${imports.id}) < (select i.created_at, i.id from imports i where i.id = ${input.before} and i.team_id = ${input.teamId})`,
    );
  }
  const rows = await db
    .select({ i: imports })
    .from(imports)
    .innerJoin(pipelines, eq(pipelines.id, imports.pipelineId))
    .where(and(...where))
    .orderBy(desc(imports.createdAt), desc(imports.id))
    .limit(input.limit);
  return rows.map((r) => r.i);
}

/**
 * Cancels a PROCESSING import: no more of its lines are stored (a worker storing a chunk finishes
 * that chunk, then finds its lease gone and drops the import), its file is removed, and it stays
 * CANCELLED with the counts of what it stored; those samples stay (a selection's `importId` finds
 * them). Cancelling a CANCELLED import answers it as it is; a READY or FAILED one is a 409.
 */
export async function cancelImport(db: DbOrTx, blobs: BlobStore, input: { teamId: string; id: string }) {
  const current = await getImport(db, input);
  if (current.status === "PROCESSING") {
    // The worker's chunk holds the row (for update) while it stores: this waits for that chunk.
    const [row] = await db
      .update(imports)
      .set({ status: "CANCELLED", leaseOwner: null, leaseExpiresAt: null, updatedAt: sql`now()` })
      .where(and(eq(imports.id, input.id), eq(imports.teamId, input.teamId), eq(imports.status, "PROCESSING")))
      .returning();
    if (row) {
      // A removal that fails (the object store away) is left to the maintenance's sweep.
      return { ...row, fileRemoved: await removeImportFile(db, blobs, row.id) };
    }
  }
  const now = current.status === "PROCESSING" ? await getImport(db, input) : current;
  if (now.status === "CANCELLED") return now;
  throw conflict(`The import is already ${now.status}; only a PROCESSING import can be cancelled.`, "id");
}

/**
 * The body as it is, or decompressed when it starts with gzip's magic bytes (1f 8b): JSON Lines
 * never does (0x1f is a control character, not the start of any JSON value or blank line).
 * A body that starts so but is not valid gzip is a 400.
 */
async function* gunzipped(body: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  const it = body[Symbol.asyncIterator]();
  let head = Buffer.alloc(0);
  let done = false;
  while (head.length < 2 && !done) {
    const next = await it.next();
    if (next.done) done = true;
    else head = Buffer.concat([head, next.value]);
  }
  async function* all(): AsyncGenerator<Uint8Array> {
    if (head.length > 0) yield head;
    if (!done) for (let next = await it.next(); !next.done; next = await it.next()) yield next.value;
  }
  if (head[0] !== 0x1f || head[1] !== 0x8b) {
    yield* all();
    return;
  }
  const gunzip = createGunzip();
  const source = Readable.from(all());
  source.on("error", (err) => gunzip.destroy(err));
  source.pipe(gunzip);
  try {
    for await (const chunk of gunzip) yield chunk as Buffer;
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code?.startsWith("Z_"))
      throw invalidRequest(`The body starts as gzip but does not decompress: ${(err as Error).message}.`, "body");
    throw err;
  } finally {
    source.destroy();
  }
}
