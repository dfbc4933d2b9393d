import { sessionRoute } from "@/lib/http/session-route";
import { listDatasets, toDatasetDto } from "@/lib/services/datasets";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// Polled by the Datasets page while a dataset is PROCESSING.
export const GET = sessionRoute({}, async ({ handle, session }) =>
  (await listDatasets(handle.db, session.team.id)).map((d) => toDatasetDto(d, session.team.slug)),
);

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
