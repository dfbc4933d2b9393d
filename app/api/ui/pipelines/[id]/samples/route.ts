import { UiSamplesPageBody } from "@/lib/ui/selection-params";
import { sessionRoute } from "@/lib/http/session-route";
import { getPipeline } from "@/lib/services/pipelines";
import { streamSelection } from "@/lib/services/samples";

export const dynamic = "force-dynamic";

// One page of the selection table (the hosted API's filters, with a bounded page size).
export const POST = sessionRoute({ body: UiSamplesPageBody }, async ({ handle, session, params, body }) => {
  const pipeline = await getPipeline(handle.db, { teamId: session.team.id, id: params.id! });
  const samples = [];
  for await (const s of streamSelection(handle.db, { pipelineId: pipeline.id, selection: body, batch: body.limit })) {
    samples.push(s);
  }
  return { samples };
});
