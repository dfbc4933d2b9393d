import { CreateDeploymentBody } from "@/lib/contracts/deployments";
import { sessionRoute } from "@/lib/http/session-route";
import { createDeployment, listDeploymentDtos, toDeploymentDto } from "@/lib/services/deployments";
import { deploymentStates } from "@/lib/services/deployment-state";

export const dynamic = "force-dynamic";

// The team's deployments with their states (the page polls it while one downloads or loads).
export const GET = sessionRoute({}, async ({ handle, session }) => listDeploymentDtos(handle.db, session.team));

// Owners create deployments: a model (a folder on the workers' machines or a hub id) in a dtype.
export const POST = sessionRoute(
  { body: CreateDeploymentBody, role: "owner", action: "create deployments" },
  async ({ handle, session, body }) => {
    const d = await createDeployment(handle.db, { teamId: session.team.id, ...body });
    const [status] = await deploymentStates(handle.db, [d]);
    return Response.json(toDeploymentDto(d, session.team.slug, status!), { status: 201 });
  },
);
