import { CreateInviteBody } from "@/lib/contracts/members";
import { env } from "@/lib/env";
import { sessionRoute } from "@/lib/http/session-route";
import { createInvite, listInvites } from "@/lib/services/members";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

export const GET = sessionRoute({ role: "owner", action: "see invites" }, async ({ handle, session }) =>
  listInvites(handle.db, session.team.id),
);

// The link is in this response only (its token is stored hashed): the owner copies it and sends
// it to the person, who opens it signed in (or signs in or up from it) and accepts.
export const POST = sessionRoute(
  { role: "owner", action: "invite members", body: CreateInviteBody },
  async ({ handle, session, body }) => {
    const { invite, token } = await createInvite(handle.db, {
      teamId: session.team.id,
      role: body.role,
      createdBy: session.user.id,
    });
    const url = `${env().PUBLIC_URL.replace(/\/$/, "")}/invite/${token}`;
    return Response.json({ invite, url }, { status: 201, headers: { "cache-control": "no-store" } });
  },
);

export const { PUT, PATCH, DELETE } = otherMethods("GET", "POST");
