import { getDb } from "@/lib/db/client";
import { serviceHealth } from "@/lib/services/health";

// Readiness: 200 while the database answers (with the live workers counted; "degraded" when there
// are none: ingest works, generation and packaging wait), 503 when it does not.
export const dynamic = "force-dynamic";
export async function GET(): Promise<Response> {
  const health = await serviceHealth(getDb().db);
  return Response.json(health, {
    status: health.status === "down" ? 503 : 200,
    headers: { "cache-control": "no-store" },
  });
}
