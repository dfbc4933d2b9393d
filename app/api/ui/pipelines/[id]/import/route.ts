import { blobStore } from "@/lib/blob";
import { env } from "@/lib/env";
import { invalidRequest } from "@/lib/errors";
import { sessionRoute } from "@/lib/http/session-route";
import { teamLimits } from "@/lib/limits";
import { createImport, toImportDto } from "@/lib/services/imports";
import { getPipeline } from "@/lib/services/pipelines";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// The dashboard's file upload: the same import as the API's, the file streamed to the blob store.
export const POST = sessionRoute({}, async ({ req, handle, session, params }) => {
  const pipeline = await getPipeline(handle.db, { teamId: session.team.id, id: params.id! });
  if (!req.body) throw invalidRequest("Choose a file to import.");
  const row = await createImport(handle.db, blobStore(), {
    teamId: session.team.id,
    pipelineId: pipeline.id,
    body: req.body as unknown as AsyncIterable<Uint8Array>,
    maxBytes: env().IMPORT_MAX_BYTES,
    maxRunning: teamLimits(session.team).importJobs,
  });
  return Response.json(toImportDto(row), { status: 202 });
});

export const { GET, PUT, PATCH, DELETE } = otherMethods("POST");
