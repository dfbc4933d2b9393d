import { sessionRoute } from "@/lib/http/session-route";
import { deleteDeployment } from "@/lib/services/deployments";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// Its scoped model keys go with it (the foreign key cascades); workers unload it within a heartbeat.
export const DELETE = sessionRoute(
  { role: "owner", action: "delete deployments" },
  async ({ handle, session, params }) => {
    const d = await deleteDeployment(handle.db, { teamId: session.team.id, name: params.name! });
    return { id: d.id, name: d.name, deleted: true };
  },
);

export const { GET, POST, PUT, PATCH } = otherMethods("DELETE");
