// GET /metrics (rewritten here by next.config.mjs): Prometheus text format for the whole service.
// A Pages Router API route because it needs the connection's own address (the loopback check
// when no METRICS_TOKEN is set), which App Router handlers cannot see.
import type { NextApiRequest, NextApiResponse } from "next";
import { getDb } from "@/lib/db/client";
import { metricsAccess, scrapeAll } from "@/lib/observe/scrape";

export default async function metrics(req: NextApiRequest, res: NextApiResponse): Promise<void> {
  const access = metricsAccess(req.headers, req.socket.remoteAddress);
  if (access !== 200) {
    res.status(access).json({
      error: {
        type: access === 401 ? "unauthorized" : "forbidden",
        message:
          access === 401
            ? "Send 'Authorization: Bearer <METRICS_TOKEN>'."
            : "Metrics are served on loopback only (not through a proxy, and only while PUBLIC_URL is a local address) unless METRICS_TOKEN is set.",
      },
    });
    return;
  }
  const { text, contentType } = await scrapeAll(getDb().db);
  res.setHeader("content-type", contentType);
  res.setHeader("cache-control", "no-store");
  res.status(200).send(text);
}
