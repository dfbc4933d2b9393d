import { sessionRoute } from "@/lib/http/session-route";
import { revokeInvite } from "@/lib/services/members";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// The link stops working at once; another team's invite id is "not found".
export const DELETE = sessionRoute({ role: "owner", action: "revoke invites" }, async ({ handle, session, params }) => {
  await revokeInvite(handle.db, { teamId: session.team.id, id: params.id!, actorId: session.user.id });
  return { id: params.id!, revoked: true };
});

export const { GET, POST, PUT, PATCH } = otherMethods("DELETE");
