import { CreateDatasetBody } from "@/lib/contracts/datasets";
import { sessionRoute } from "@/lib/http/session-route";
import { createTeamDataset } from "@/lib/services/dataset-quota";
import { toDatasetDto } from "@/lib/services/datasets";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// The dialog of the selection page: the API's own body (name + filters); a worker packages it.
export const POST = sessionRoute({ body: CreateDatasetBody }, async ({ handle, session, params, body }) => {
  const dataset = await createTeamDataset(handle.db, session.team, {
    pipelineId: params.id!,
    name: body.name,
    selection: body.selection,
    options: body.options,
  });
  return Response.json(toDatasetDto(dataset, session.team.slug), { status: 201 });
});

export const { GET, PUT, PATCH, DELETE } = otherMethods("POST");
