import { blobStore } from "@/lib/blob";
import { UpdatePipelineBody } from "@/lib/contracts/pipelines";
import { apiRoute } from "@/lib/http/api-route";
import { deletePipeline } from "@/lib/services/maintenance";
import { getPipeline, toPipelineDto, updatePipeline } from "@/lib/services/pipelines";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

export const GET = apiRoute({}, async ({ handle, principal, params }) =>
  toPipelineDto(await getPipeline(handle.db, { teamId: principal.team.id, id: params.id! })),
);

// The name and the retention period (`retentionDays: null` keeps samples forever).
export const PATCH = apiRoute({ body: UpdatePipelineBody }, async ({ handle, principal, params, body }) =>
  toPipelineDto(await updatePipeline(handle.db, { teamId: principal.team.id, id: params.id!, changes: body })),
);

// Gone at once (404 everywhere); the workers delete its samples in the background.
export const DELETE = apiRoute({}, async ({ handle, principal, params }) => {
  await deletePipeline(handle.db, blobStore(), { teamId: principal.team.id, id: params.id! });
  return { deleted: 1 };
});

export const { POST, PUT } = otherMethods("GET", "PATCH", "DELETE");
