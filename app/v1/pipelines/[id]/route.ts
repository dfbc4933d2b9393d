import { apiRoute } from "@/lib/http/api-route";
import { getPipeline, toPipelineDto } from "@/lib/services/pipelines";

export const dynamic = "force-dynamic";

export const GET = apiRoute({}, async ({ handle, principal, params }) =>
  toPipelineDto(await getPipeline(handle.db, { teamId: principal.team.id, id: params.id! })),
);
