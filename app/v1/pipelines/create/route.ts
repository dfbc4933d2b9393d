import { CreatePipelineBody } from "@/lib/contracts/pipelines";
import { apiRoute } from "@/lib/http/api-route";
import { createPipeline, toPipelineDto } from "@/lib/services/pipelines";

export const dynamic = "force-dynamic";

export const POST = apiRoute({ body: CreatePipelineBody, idempotent: true }, async ({ handle, principal, body }) =>
  toPipelineDto(await createPipeline(handle.db, { teamId: principal.team.id, name: body.name })),
);
