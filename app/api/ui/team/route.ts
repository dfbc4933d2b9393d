import { cookies } from "next/headers";
import { z } from "zod";
import { TEAM_COOKIE } from "@/lib/auth/session";
import { env } from "@/lib/env";
import { notFound } from "@/lib/errors";
import { sessionRoute } from "@/lib/http/session-route";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

const Body = z.strictObject({ teamId: z.string().min(1) });

// Switches the current team: only to a team the user is a member of.
export const POST = sessionRoute({ body: Body }, async ({ body, session }) => {
  const team = session.teams.find((t) => t.id === body.teamId);
  if (!team) throw notFound(`No team with id '${body.teamId}'.`, "teamId");
  (await cookies()).set(TEAM_COOKIE, team.id, {
    httpOnly: true,
    sameSite: "lax",
    secure: env().PUBLIC_URL.startsWith("https:"),
    path: "/",
    maxAge: 365 * 24 * 3600,
  });
  return { team: { id: team.id, slug: team.slug, name: team.name } };
});

export const { GET, PUT, PATCH, DELETE } = otherMethods("POST");
