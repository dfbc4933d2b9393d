import { AddSampleBody } from "@/lib/contracts/pipelines";
import { apiRoute } from "@/lib/http/api-route";
import { addSample } from "@/lib/services/samples";

export const dynamic = "force-dynamic";

export const POST = apiRoute({ body: AddSampleBody }, async ({ handle, principal, params, body }) =>
  addSample(handle.db, { teamId: principal.team.id, pipelineId: params.id!, sample: body }),
);
