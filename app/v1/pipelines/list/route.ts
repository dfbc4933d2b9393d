import { apiRoute } from "@/lib/http/api-route";
import { listPipelines, toPipelineDto } from "@/lib/services/pipelines";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

export const GET = apiRoute({}, async ({ handle, principal }) =>
  (await listPipelines(handle.db, principal.team.id)).map(toPipelineDto),
);

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
