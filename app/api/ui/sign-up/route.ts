import { SignUpBody } from "@/lib/contracts/users";
import { sessionRoute } from "@/lib/http/session-route";
import { signUp } from "@/lib/services/users";

export const dynamic = "force-dynamic";

// A new user who owns a new team; the form then signs in through next-auth.
export const POST = sessionRoute({ auth: "none", body: SignUpBody }, async ({ handle, body }) => {
  const { user, team } = await signUp(handle.db, body);
  return Response.json(
    { user: { id: user.id, email: user.email }, team: { id: team.id, slug: team.slug } },
    { status: 201 },
  );
});
