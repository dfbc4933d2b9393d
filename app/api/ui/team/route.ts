import { z } from "zod";
import { setCurrentTeam } from "@/lib/auth/session";
import { notFound } from "@/lib/errors";
import { sessionRoute } from "@/lib/http/session-route";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

const Body = z.strictObject({ teamId: z.string().min(1) });

// Switches the current team: only to a team the user is a member of.
export const POST = sessionRoute({ body: Body, anyTeam: true }, async ({ body, session }) => {
  const team = session.teams.find((t) => t.id === body.teamId);
  if (!team) throw notFound(`No team with id '${body.teamId}'.`, "teamId");
  await setCurrentTeam(team.id);
  return { team: { id: team.id, slug: team.slug, name: team.name } };
});

export const { GET, PUT, PATCH, DELETE } = otherMethods("POST");
