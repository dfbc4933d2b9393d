import { DeleteSamplesBody } from "@/lib/contracts/deletion";
import { env } from "@/lib/env";
import { apiRoute } from "@/lib/http/api-route";
import { takeQuerySlot } from "@/lib/limits/team-queries";
import { getPipeline } from "@/lib/services/pipelines";
import { deleteSelection } from "@/lib/services/sample-deletion";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// The samples matching the filters (or all, with "all": true), in batches; answers how many went.
export const POST = apiRoute({ body: DeleteSamplesBody }, async ({ handle, principal, params, body }) => {
  const pipeline = await getPipeline(handle.db, { teamId: principal.team.id, id: params.id! });
  const release = await takeQuerySlot(principal.team.id);
  try {
    const deleted = await deleteSelection(handle.db, {
      pipelineId: pipeline.id,
      filters: body,
      batch: env().DELETE_BATCH_SIZE,
    });
    return { deleted };
  } finally {
    release();
  }
});

export const { GET, PUT, PATCH, DELETE } = otherMethods("POST");
