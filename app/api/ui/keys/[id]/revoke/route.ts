import { sessionRoute } from "@/lib/http/session-route";
import { revokeApiKey } from "@/lib/services/api-keys";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// Idempotent; a key of another team is "not found".
export const POST = sessionRoute({ role: "owner", action: "revoke keys" }, async ({ handle, session, params }) => {
  const key = await revokeApiKey(handle.db, { id: params.id!, teamId: session.team.id });
  return { id: key.id, revokedAt: key.revokedAt!.toISOString() };
});

export const { GET, PUT, PATCH, DELETE } = otherMethods("POST");
