import { logger } from "./log";
import { appMetrics, metricsEnabled } from "./metrics";

/**
 * A request's route as its pattern (`/v1/pipelines/[id]/add`), never the raw path: metric labels
 * and log fields stay few, and ids stay out of them. Built from the path and the route's
 * parameters: each parameter's segment (or segments, for a catch-all) becomes its name.
 */
export function routePattern(pathname: string, params: Record<string, string | string[] | undefined>): string {
  const segments = pathname.split("/").map((s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  });
  for (const [name, value] of Object.entries(params)) {
    if (value === undefined) continue;
    const parts = Array.isArray(value) ? value : [value];
    const at = segments.findIndex((_, i) => parts.every((p, j) => segments[i + j] === p));
    if (at < 0 || parts.length === 0) continue;
    segments.splice(at, parts.length, Array.isArray(value) ? `[...${name}]` : `[${name}]`);
  }
  return segments.join("/") || "/";
}

/** One line in the log and one sample in the metrics, per request, when its response starts. */
export function observeRequest(o: {
  route: string;
  method: string;
  status: number;
  startedAt: number;
  requestId: string;
  teamId?: string;
}): void {
  const seconds = (performance.now() - o.startedAt) / 1000;
  if (metricsEnabled()) {
    const m = appMetrics();
    m.httpRequests.inc({ route: o.route, method: o.method, status: String(o.status) });
    m.httpDuration.observe({ route: o.route, method: o.method }, seconds);
  }
  const line = {
    reqId: o.requestId,
    route: o.route,
    method: o.method,
    status: o.status,
    ms: Math.round(seconds * 10_000) / 10,
    ...(o.teamId ? { teamId: o.teamId } : {}),
  };
  if (o.status >= 500) logger().error(line, "request failed");
  else logger().info(line, "request");
}

/** observeRequest for an App Router handler's response; returns the response. */
export async function observeResponse(
  req: Request,
  context: { params: Promise<Record<string, string | string[] | undefined>> },
  o: { requestId: string; startedAt: number; teamId?: string },
  res: Response,
): Promise<Response> {
  const params = (await context.params) ?? {};
  observeRequest({
    route: routePattern(new URL(req.url).pathname, params),
    method: req.method,
    status: res.status,
    ...o,
  });
  return res;
}
