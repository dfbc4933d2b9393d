import { DeleteSamplesBody } from "@/lib/contracts/deletion";
import { env } from "@/lib/env";
import { apiRoute } from "@/lib/http/api-route";
import { withQuerySlot } from "@/lib/limits/team-queries";
import { getPipeline } from "@/lib/services/pipelines";
import { deleteSelection } from "@/lib/services/sample-deletion";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// The samples matching the filters (or all, with "all": true), in batches; answers how many went.
export const POST = apiRoute({ body: DeleteSamplesBody }, async ({ handle, principal, params, body }) => {
  const pipeline = await getPipeline(handle.db, { teamId: principal.team.id, id: params.id! });
  const input = { pipelineId: pipeline.id, filters: body, batch: env().DELETE_BATCH_SIZE };
  return { deleted: await withQuerySlot(principal.team.id, () => deleteSelection(handle.db, input)) };
});

export const { GET, PUT, PATCH, DELETE } = otherMethods("POST");
