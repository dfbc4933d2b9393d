import { UsageQuery } from "@/lib/contracts/usage";
import { apiRoute } from "@/lib/http/api-route";
import { validated } from "@/lib/http/route-parts";
import { usageOf } from "@/lib/services/usage";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// The team's own usage: requests and tokens per day, key or deployment (rows only, no totals).
export const GET = apiRoute({}, async ({ req, handle, principal }) => {
  const q = validated(UsageQuery, Object.fromEntries(new URL(req.url).searchParams));
  return { data: await usageOf(handle.db, { teamId: principal.team.id, ...q }) };
});

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
