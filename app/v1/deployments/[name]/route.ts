import { apiRoute } from "@/lib/http/api-route";
import { getDeploymentByName, toDeploymentDto } from "@/lib/services/deployments";
import { deploymentStates } from "@/lib/services/deployment-state";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// One deployment of the team, with its state; another team's is 404 like an unknown name.
export const GET = apiRoute({}, async ({ handle, principal, params }) => {
  const d = await getDeploymentByName(handle.db, { teamId: principal.team.id, name: params.name! }, "name");
  const [status] = await deploymentStates(handle.db, [d]);
  return toDeploymentDto(d, principal.team.slug, status!);
});

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
