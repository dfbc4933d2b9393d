import { CreateDatasetBody } from "@/lib/contracts/datasets";
import { apiRoute } from "@/lib/http/api-route";
import { createTeamDataset } from "@/lib/services/dataset-quota";
import { toDatasetDto } from "@/lib/services/datasets";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// The dataset is returned PROCESSING; a worker packages it (workers/packager).
export const POST = apiRoute(
  { body: CreateDatasetBody, idempotent: true },
  async ({ handle, principal, params, body }) => {
    const dataset = await createTeamDataset(handle.db, principal.team, {
      pipelineId: params.id!,
      name: body.name,
      selection: body.selection,
      options: body.options,
    });
    return toDatasetDto(dataset, principal.team.slug);
  },
);

export const { GET, PUT, PATCH, DELETE } = otherMethods("POST");
