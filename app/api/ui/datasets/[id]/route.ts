import { blobStore } from "@/lib/blob";
import { sessionRoute } from "@/lib/http/session-route";
import { deleteDataset, getDataset, toDatasetDto } from "@/lib/services/datasets";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// The dataset page follows its packaging with this.
export const GET = sessionRoute({}, async ({ handle, session, params }) =>
  toDatasetDto(await getDataset(handle.db, { teamId: session.team.id, id: params.id! }), session.team.slug),
);

export const DELETE = sessionRoute({ role: "owner", action: "delete datasets" }, async ({ handle, session, params }) =>
  toDatasetDto(
    await deleteDataset(handle.db, blobStore(), { teamId: session.team.id, id: params.id! }),
    session.team.slug,
  ),
);

export const { POST, PUT, PATCH } = otherMethods("GET", "DELETE");
