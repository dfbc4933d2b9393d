import { CreatePipelineBody } from "@/lib/contracts/pipelines";
import { apiRoute } from "@/lib/http/api-route";
import { createPipeline, toPipelineDto } from "@/lib/services/pipelines";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

export const POST = apiRoute({ body: CreatePipelineBody, idempotent: true }, async ({ handle, principal, body }) =>
  toPipelineDto(await createPipeline(handle.db, { teamId: principal.team.id, name: body.name })),
);

export const { GET, PUT, PATCH, DELETE } = otherMethods("POST");
