import { apiRoute } from "@/lib/http/api-route";
import { listDeploymentDtos } from "@/lib/services/deployments";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// The team's deployments, each with its model, dtype, URL and state (downloading, ready…).
export const GET = apiRoute({}, async ({ handle, principal }) => listDeploymentDtos(handle.db, principal.team));

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
