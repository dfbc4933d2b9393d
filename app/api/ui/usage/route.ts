import { UsageQuery } from "@/lib/contracts/usage";
import { validated } from "@/lib/http/route-parts";
import { sessionRoute } from "@/lib/http/session-route";
import { usageDashboard } from "@/lib/services/usage";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// The usage page's data for a range of days: per day, per deployment (with TTFT percentiles), per key.
export const GET = sessionRoute({}, async ({ req, handle, session }) => {
  const { from, to } = validated(UsageQuery, Object.fromEntries(new URL(req.url).searchParams));
  return usageDashboard(handle.db, { teamId: session.team.id, from, to });
});

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
