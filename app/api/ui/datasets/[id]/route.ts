import { blobStore } from "@/lib/blob";
import { sessionRoute } from "@/lib/http/session-route";
import { deleteDataset, toDatasetDto } from "@/lib/services/datasets";

export const dynamic = "force-dynamic";

export const DELETE = sessionRoute({}, async ({ handle, session, params }) =>
  toDatasetDto(
    await deleteDataset(handle.db, blobStore(), { teamId: session.team.id, id: params.id! }),
    session.team.slug,
  ),
);
