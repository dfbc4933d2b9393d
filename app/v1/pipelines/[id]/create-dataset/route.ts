import { CreateDatasetBody } from "@/lib/contracts/datasets";
import { apiRoute } from "@/lib/http/api-route";
import { createDataset, toDatasetDto } from "@/lib/services/datasets";

export const dynamic = "force-dynamic";

// The dataset is returned PROCESSING; a worker packages it (workers/packager).
export const POST = apiRoute({ body: CreateDatasetBody }, async ({ handle, principal, params, body }) => {
  const dataset = await createDataset(handle.db, {
    teamId: principal.team.id,
    pipelineId: params.id!,
    name: body.name,
    selection: body.selection,
  });
  return toDatasetDto(dataset, principal.team.slug);
});
