import { CountBody } from "@/lib/contracts/pipelines";
import { apiRoute } from "@/lib/http/api-route";
import { takeQuerySlot } from "@/lib/limits/team-queries";
import { getPipeline } from "@/lib/services/pipelines";
import { countSelection } from "@/lib/services/samples";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

export const POST = apiRoute({ body: CountBody }, async ({ handle, principal, params, body }) => {
  const pipeline = await getPipeline(handle.db, { teamId: principal.team.id, id: params.id! });
  const release = await takeQuerySlot(principal.team.id);
  try {
    return { count: await countSelection(handle.db, { pipelineId: pipeline.id, selection: body }) };
  } finally {
    release();
  }
});

export const { GET, PUT, PATCH, DELETE } = otherMethods("POST");
