// GET /api/health (readiness): 200 while the database answers (with the live workers counted;
// "degraded" when there are none: ingest works, generation and packaging wait), 503 when it does
// not, or while its schema is older than this app's ("migrating"). A Pages Router API route because which models the workers serve is told only to whoever may
// read /metrics (the token, or this machine without one), and that needs the connection's own
// address, which App Router handlers cannot see. /api/health/live stays an App Router route.
import type { NextApiRequest, NextApiResponse } from "next";
import { getDb } from "@/lib/db/client";
import { methodNotAllowed } from "@/lib/errors";
import { metricsAccess } from "@/lib/observe/scrape";
import { serviceHealth } from "@/lib/services/health";

export default async function health(req: NextApiRequest, res: NextApiResponse): Promise<void> {
  if (req.method !== "GET" && req.method !== "HEAD") {
    res.setHeader("allow", "GET, HEAD");
    res.status(405).json(methodNotAllowed(req.method, "GET").toBody());
    return;
  }
  const operator = metricsAccess(req.headers, req.socket.remoteAddress) === 200;
  const body = await serviceHealth(getDb().db, { models: operator });
  res.setHeader("cache-control", "no-store");
  res.status(body.status === "down" || body.status === "migrating" ? 503 : 200).json(body);
}
