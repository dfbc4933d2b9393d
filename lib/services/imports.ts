import { and, eq } from "drizzle-orm";
import type { BlobStore } from "../blob";
import type { ImportDto } from "../contracts/imports";
import type { DbOrTx } from "../db/client";
import { imports, type Import } from "../db/schema";
import { notFound, payloadTooLarge } from "../errors";
import { newId } from "../ids";

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
 * Stores the uploaded body (413 past `maxBytes`, leaving nothing behind) and creates the import.
 * The pipeline must be the caller's (checked by the route before the body is read).
 */
export async function createImport(
  db: DbOrTx,
  blobs: BlobStore,
  input: { teamId: string; pipelineId: string; body: AsyncIterable<Uint8Array>; maxBytes: number },
): Promise<Import> {
  const id = newId("import");
  const key = `${importBlobPrefix(id)}upload.jsonl`;
  let bytes = 0;
  async function* counted(): AsyncGenerator<Uint8Array> {
    for await (const chunk of input.body) {
      bytes += chunk.byteLength;
      if (bytes > input.maxBytes) throw payloadTooLarge(input.maxBytes);
      yield chunk;
    }
  }
  await blobs.put(key, counted(), { contentType: "application/x-ndjson" });
  try {
    const [row] = await db
      .insert(imports)
      .values({ id, teamId: input.teamId, pipelineId: input.pipelineId, blobKey: key, bytes })
      .returning();
    return row!;
  } catch (err) {
    await blobs.removePrefix(importBlobPrefix(id)).catch(() => {});
    throw err;
  }
}

/** One import of the team; another team's is not found. */
export async function getImport(db: DbOrTx, input: { teamId: string; id: string }): Promise<Import> {
  const [row] = await db
    .select()
    .from(imports)
    .where(and(eq(imports.id, input.id), eq(imports.teamId, input.teamId)));
  if (!row) throw notFound(`No import with id '${input.id}'.`, "id");
  return row;
}
