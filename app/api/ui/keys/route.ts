import { CreateKeyBody } from "@/lib/contracts/api-keys";
import { forbidden, notFound } from "@/lib/errors";
import { sessionRoute } from "@/lib/http/session-route";
import { createApiKey, listApiKeys } from "@/lib/services/api-keys";
import { listDeployments } from "@/lib/services/deployments";
import { toApiKeyDto } from "@/lib/ui/api-key-dto";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

export const GET = sessionRoute({}, async ({ handle, session }) =>
  (await listApiKeys(handle.db, session.team.id)).map(toApiKeyDto),
);

// The secret is in this response only; it is never stored or shown again.
// An API key acts for the whole team, owner's actions included (deleting pipelines, datasets,
// samples): only owners create one. A member may create model keys (completions only, which the
// playground gives them anyway).
export const POST = sessionRoute({ body: CreateKeyBody }, async ({ handle, session, body }) => {
  if (body.kind === "api" && session.team.role !== "owner")
    throw forbidden("Only owners of the team can create API keys: an API key can do whatever an owner can.");
  if (body.deploymentId) {
    const deployments = await listDeployments(handle.db, session.team.id);
    if (!deployments.some((d) => d.id === body.deploymentId)) {
      throw notFound(`No deployment with id '${body.deploymentId}'.`, "deploymentId");
    }
  }
  const { key, secret } = await createApiKey(handle.db, {
    teamId: session.team.id,
    ...body,
    createdBy: session.user.id,
  });
  const [row] = (await listApiKeys(handle.db, session.team.id)).filter((k) => k.id === key.id);
  return Response.json({ key: toApiKeyDto(row!), secret }, { status: 201, headers: { "cache-control": "no-store" } });
});

export const { PUT, PATCH, DELETE } = otherMethods("GET", "POST");
