import { SignUpBody } from "@/lib/contracts/users";
import { env } from "@/lib/env";
import { forbidden } from "@/lib/errors";
import { clientAddress } from "@/lib/http/client-address";
import { sessionRoute } from "@/lib/http/session-route";
import { takeSignUp } from "@/lib/limits";
import { signUp } from "@/lib/services/users";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// A new user who owns a new team, or (with an invite link's token) who joins the invite's team;
// the form then signs in through next-auth. SIGN_UP=invite takes only the second.
export const POST = sessionRoute({ auth: "none", body: SignUpBody }, async ({ req, handle, body }) => {
  if (body.invite === undefined && env().SIGN_UP === "invite")
    throw forbidden("Accounts on this server are made with an invite link: ask a team owner for one.");
  takeSignUp(clientAddress((name) => req.headers.get(name)));
  const { user, team } = await signUp(handle.db, body);
  return Response.json(
    { user: { id: user.id, email: user.email }, team: { id: team.id, slug: team.slug } },
    { status: 201 },
  );
});

export const { GET, PUT, PATCH, DELETE } = otherMethods("POST");
