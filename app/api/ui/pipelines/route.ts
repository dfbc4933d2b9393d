import { CreatePipelineBody } from "@/lib/contracts/pipelines";
import { sessionRoute } from "@/lib/http/session-route";
import { createPipeline, listPipelines, toPipelineDto } from "@/lib/services/pipelines";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

export const GET = sessionRoute({}, async ({ handle, session }) =>
  (await listPipelines(handle.db, session.team.id)).map(toPipelineDto),
);

export const POST = sessionRoute({ body: CreatePipelineBody }, async ({ handle, session, body }) =>
  toPipelineDto(await createPipeline(handle.db, { teamId: session.team.id, name: body.name })),
);

export const { PUT, PATCH, DELETE } = otherMethods("GET", "POST");
