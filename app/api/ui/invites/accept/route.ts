import { AcceptInviteBody } from "@/lib/contracts/members";
import { getSessionUser, setCurrentTeam } from "@/lib/auth/session";
import { ApiError } from "@/lib/errors";
import { sessionRoute } from "@/lib/http/session-route";
import { acceptInvite } from "@/lib/services/members";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// Any signed-in user (one without a team of their own too) joins the invite's team, which
// becomes their current team. A POST, so that a link preview fetching the page uses nothing up.
export const POST = sessionRoute({ auth: "none", body: AcceptInviteBody }, async ({ handle, body }) => {
  const user = await getSessionUser();
  if (!user) throw new ApiError(401, "unauthorized", "Sign in to accept the invite.");
  const team = await acceptInvite(handle.db, { token: body.token, userId: user.id });
  await setCurrentTeam(team.id);
  return { team: { id: team.id, slug: team.slug, name: team.name } };
});

export const { GET, PUT, PATCH, DELETE } = otherMethods("POST");
