// POST /v1/pipelines/:id/import (rewritten here by next.config.mjs): a JSONL file streamed into
// the blob store, then 202 with the import; a worker stores its lines (workers/importer).
import { blobStore } from "@/lib/blob";
import { IMPORT_CONTENT_TYPES } from "@/lib/contracts/imports";
import { env } from "@/lib/env";
import { invalidRequest, payloadTooLarge } from "@/lib/errors";
import { nodeApiRoute } from "@/lib/http/node-api-route";
import { teamLimits } from "@/lib/limits";
import { createImport, toImportDto } from "@/lib/services/imports";
import { getPipeline } from "@/lib/services/pipelines";

// The body is far above MAX_BODY_BYTES (IMPORT_MAX_BYTES, 1 GiB by default): never parsed or
// buffered here, the request stream goes to the blob store as it arrives.
export const config = { api: { bodyParser: false } };

export default nodeApiRoute(
  { method: "POST", params: ["id"], status: 202 },
  async ({ req, handle, principal, params }) => {
    // The pipeline first: nothing is read for an unknown (or another team's) pipeline.
    const pipeline = await getPipeline(handle.db, { teamId: principal.team.id, id: params.id! });
    const type = req.headers["content-type"]?.split(";")[0]!.trim().toLowerCase();
    if (type && !(IMPORT_CONTENT_TYPES as readonly string[]).includes(type)) {
      throw invalidRequest(
        `An import's body is JSON Lines (Content-Type: application/x-ndjson), not '${type}'.`,
        "Content-Type",
      );
    }
    // gzip is recognised by its first bytes (lib/services/imports.ts), labelled or not.
    const encoding = req.headers["content-encoding"]?.trim().toLowerCase();
    if (encoding && encoding !== "gzip" && encoding !== "identity") {
      throw invalidRequest(
        `An import's body may be gzipped (Content-Encoding: gzip), not '${encoding}'.`,
        "Content-Encoding",
      );
    }
    const max = env().IMPORT_MAX_BYTES;
    if (Number(req.headers["content-length"] ?? 0) > max) throw payloadTooLarge(max);
    const row = await createImport(handle.db, blobStore(), {
      teamId: principal.team.id,
      pipelineId: pipeline.id,
      body: req,
      maxBytes: max,
      maxRunning: teamLimits(principal.team).importJobs,
    });
    return toImportDto(row);
  },
);
