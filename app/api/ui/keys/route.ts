import { CreateKeyBody } from "@/lib/contracts/api-keys";
import { notFound } from "@/lib/errors";
import { sessionRoute } from "@/lib/http/session-route";
import { createApiKey, listApiKeys } from "@/lib/services/api-keys";
import { listDeployments } from "@/lib/services/deployments";
import { toApiKeyDto } from "@/lib/ui/api-key-dto";

export const dynamic = "force-dynamic";

export const GET = sessionRoute({}, async ({ handle, session }) =>
  (await listApiKeys(handle.db, session.team.id)).map(toApiKeyDto),
);

// The secret is in this response only; it is never stored or shown again.
export const POST = sessionRoute({ body: CreateKeyBody }, async ({ handle, session, body }) => {
  if (body.deploymentId) {
    const deployments = await listDeployments(handle.db, session.team.id);
    if (!deployments.some((d) => d.id === body.deploymentId)) {
      throw notFound(`No deployment with id '${body.deploymentId}'.`, "deploymentId");
    }
  }
  const { key, secret } = await createApiKey(handle.db, { teamId: session.team.id, ...body });
  const [row] = (await listApiKeys(handle.db, session.team.id)).filter((k) => k.id === key.id);
  return Response.json({ key: toApiKeyDto(row!), secret }, { status: 201, headers: { "cache-control": "no-store" } });
});
