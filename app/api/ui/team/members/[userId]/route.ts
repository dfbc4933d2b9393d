import { SetRoleBody } from "@/lib/contracts/members";
import { forbidden, invalidRequest } from "@/lib/errors";
import { sessionRoute } from "@/lib/http/session-route";
import { removeMember, setMemberRole } from "@/lib/services/members";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// Owners change roles; the team always keeps an owner (409 otherwise). A member made no longer
// an owner loses the invite links and the API keys they made (see setMemberRole).
export const PATCH = sessionRoute(
  { role: "owner", action: "change roles", body: SetRoleBody },
  async ({ handle, session, params, body }) => {
    const { revokedKeys } = await setMemberRole(handle.db, {
      teamId: session.team.id,
      userId: params.userId!,
      role: body.role,
      actorId: session.user.id,
    });
    return { userId: params.userId!, role: body.role, revokedKeys };
  },
);

// Owners remove members; anyone may leave (remove themselves). A removed member loses the team
// at their next request, and their running playground streams end. `?revokeKeys=true` revokes
// the keys they made as well.
export const DELETE = sessionRoute({}, async ({ req, handle, session, params }) => {
  const self = params.userId === session.user.id;
  if (!self && session.team.role !== "owner") throw forbidden("Only owners of the team can remove members.");
  const flag = new URL(req.url).searchParams.get("revokeKeys");
  if (flag !== null && flag !== "true" && flag !== "false")
    throw invalidRequest("revokeKeys must be 'true' or 'false'.", "revokeKeys");
  // Revoking keys is an owner's act, leaving the team included.
  if (flag === "true" && session.team.role !== "owner") throw forbidden("Only owners of the team can revoke keys.");
  const { revokedKeys } = await removeMember(handle.db, {
    teamId: session.team.id,
    userId: params.userId!,
    revokeKeys: flag === "true",
    actorId: session.user.id,
  });
  return { userId: params.userId!, removed: true, revokedKeys };
});

export const { GET, POST, PUT } = otherMethods("PATCH", "DELETE");
