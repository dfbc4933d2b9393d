import { blobStore } from "@/lib/blob";
import { apiRoute } from "@/lib/http/api-route";
import { deleteDataset, getDataset, toDatasetDto } from "@/lib/services/datasets";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

export const GET = apiRoute({}, async ({ handle, principal, params }) =>
  toDatasetDto(await getDataset(handle.db, { teamId: principal.team.id, id: params.id! }), principal.team.slug),
);

// Sets deletedAt and removes the file; the name becomes free and the id answers 404 from then on.
export const DELETE = apiRoute({}, async ({ handle, principal, params }) =>
  toDatasetDto(
    await deleteDataset(handle.db, blobStore(), { teamId: principal.team.id, id: params.id! }),
    principal.team.slug,
  ),
);

export const { POST, PUT, PATCH } = otherMethods("GET", "DELETE");
