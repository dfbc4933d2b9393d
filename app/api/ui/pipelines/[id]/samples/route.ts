import { UiSamplesPageBody } from "@/lib/ui/selection-params";
import { sessionRoute } from "@/lib/http/session-route";
import { takeQuerySlot } from "@/lib/limits/team-queries";
import { getPipeline } from "@/lib/services/pipelines";
import { streamSelection } from "@/lib/services/samples";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// One page of the selection table (the hosted API's filters, with a bounded page size); each
// sample also carries its generation facts (captured completions), which the preview shows.
export const POST = sessionRoute({ body: UiSamplesPageBody }, async ({ handle, session, params, body }) => {
  const pipeline = await getPipeline(handle.db, { teamId: session.team.id, id: params.id! });
  const samples = [];
  const release = await takeQuerySlot(session.team.id);
  try {
    for await (const s of streamSelection(handle.db, {
      pipelineId: pipeline.id,
      selection: body,
      batch: body.limit,
      withGeneration: true,
    })) {
      samples.push(s);
    }
  } finally {
    release();
  }
  return { samples };
});

export const { GET, PUT, PATCH, DELETE } = otherMethods("POST");
