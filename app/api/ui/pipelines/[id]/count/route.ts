import { SelectionBody } from "@/lib/contracts/pipelines";
import { sessionRoute } from "@/lib/http/session-route";
import { withQuerySlot } from "@/lib/limits/team-queries";
import { getPipeline } from "@/lib/services/pipelines";
import { countSelection } from "@/lib/services/samples";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// The live count of the selection page, and the sample count of each row of the pipelines list.
export const POST = sessionRoute({ body: SelectionBody }, async ({ handle, session, params, body }) => {
  const pipeline = await getPipeline(handle.db, { teamId: session.team.id, id: params.id! });
  const count = () => countSelection(handle.db, { pipelineId: pipeline.id, selection: body });
  return { count: await withQuerySlot(session.team.id, count) };
});

export const { GET, PUT, PATCH, DELETE } = otherMethods("POST");
