import { CountBody } from "@/lib/contracts/pipelines";
import { apiRoute } from "@/lib/http/api-route";
import { withQuerySlot } from "@/lib/limits/team-queries";
import { getPipeline } from "@/lib/services/pipelines";
import { countSelection } from "@/lib/services/samples";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

export const POST = apiRoute({ body: CountBody }, async ({ handle, principal, params, body }) => {
  const pipeline = await getPipeline(handle.db, { teamId: principal.team.id, id: params.id! });
  const count = () => countSelection(handle.db, { pipelineId: pipeline.id, selection: body });
  return { count: await withQuerySlot(principal.team.id, count) };
});

export const { GET, PUT, PATCH, DELETE } = otherMethods("POST");
