import { sessionRoute } from "@/lib/http/session-route";
import { listMembers } from "@/lib/services/members";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// Every member sees who else is in the team (and their roles).
export const GET = sessionRoute({}, async ({ handle, session }) =>
  listMembers(handle.db, session.team.id, session.user.id),
);

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
