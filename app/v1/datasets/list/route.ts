import { apiRoute } from "@/lib/http/api-route";
import { listDatasets, toDatasetDto } from "@/lib/services/datasets";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

export const GET = apiRoute({}, async ({ handle, principal }) =>
  (await listDatasets(handle.db, principal.team.id)).map((d) => toDatasetDto(d, principal.team.slug)),
);

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
