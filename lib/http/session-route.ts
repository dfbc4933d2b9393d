import { env } from "../env";
import type { z } from "zod";
import { cookies } from "next/headers";
import { getSessionUser, resolveTeamContext, TEAM_COOKIE, type TeamContext } from "../auth/session";
import { getDb, type DbHandle } from "../db/client";
import { memberLimitId, takeRequest, teamLimits } from "../limits";
import { ApiError, conflict, forbidden } from "../errors";
import { observeResponse } from "../observe/request";
import { errorResponse, newRequestId } from "./respond";
import { handlerResponse, routeParams, validBody, type RouteContext } from "./route-parts";

type Options<B extends z.ZodType | undefined, A extends "session" | "none"> = {
  /** `session` (default): a signed-in user with a team. `none`: public (sign-up). */
  auth?: A;
  /**
   * `owner`: only owners of the current team may (revoking keys, deleting datasets: what would
   * let a member take away the team's credentials or data); members get 403.
   */
  role?: "owner";
  /** What the route does, for the 403 message ("revoke keys"). */
  action?: string;
  /**
   * Take a request whose page shows another team than the current one (switching teams). Every
   * other route refuses it with a 409: see components/shell/page-team.ts.
   */
  anyTeam?: boolean;
  /** Zod schema of the JSON body (the same contract as the hosted API where there is one). */
  body?: B;
};

type Handler<B extends z.ZodType | undefined, A extends "session" | "none"> = (ctx: {
  req: Request;
  requestId: string;
  /** `performance.now()` when the request came in (before its session was read). */
  startedAt: number;
  handle: DbHandle;
  params: Record<string, string>;
  body: B extends z.ZodType ? z.infer<B> : undefined;
  session: A extends "session" ? TeamContext : undefined;
}) => Promise<Response | unknown>;

/** The team the dashboard page that made the request shows (components/shell/page-team.ts). */
const PAGE_TEAM_HEADER = "x-lmp-team";

const unsignedIn = () => new ApiError(401, "unauthorized", "Sign in to continue.");

/**
 * `apiRoute` for the dashboard's JSON endpoints (`/api/ui/**`): the caller is the next-auth
 * session and its current team instead of an API key; everything else (body limit, zod,
 * error body, request id) is the same.
 */
export function sessionRoute<B extends z.ZodType | undefined = undefined, A extends "session" | "none" = "session">(
  options: Options<B, A>,
  handler: Handler<B, A>,
) {
  return async (req: Request, context: RouteContext): Promise<Response> => {
    const requestId = newRequestId();
    const startedAt = performance.now();
    let teamId: string | undefined;
    let limitHeaders: Record<string, string> = {};
    let res: Response;
    try {
      // Session cookies are SameSite=Lax, which still sends them on a cross-site top-level GET (a
      // link to the playground's stream would start a generation): every method is checked.
      assertSameOrigin(req);
      const handle = getDb();
      let session: TeamContext | undefined;
      if ((options.auth ?? "session") === "session") {
        const user = await getSessionUser();
        if (!user) throw unsignedIn();
        session = (await resolveTeamContext(handle.db, user, (await cookies()).get(TEAM_COOKIE)?.value)) ?? undefined;
        if (!session) throw forbidden("You are not a member of any team: open an invite link to join one.");
        const shown = req.headers.get(PAGE_TEAM_HEADER);
        if (shown && shown !== session.team.id && !options.anyTeam) {
          throw conflict(
            `The current team changed to ${session.team.name} in another tab: reload this page to work in it.`,
          );
        }
        teamId = session.team.id;
        if (options.role === "owner" && session.team.role !== "owner") {
          throw forbidden(`Only owners of the team can ${options.action ?? "do this"}.`);
        }
        // A member's requests count as a key's of the team do (its requests per minute).
        limitHeaders = takeRequest(memberLimitId(session.user.id, session.team.id), teamLimits(session.team));
      }
      const body = await validBody(req, options.body);
      const params = await routeParams(context);
      const result = await handler({
        req,
        requestId,
        startedAt,
        handle,
        params,
        body: body as never,
        session: session as never,
      });
      res = handlerResponse(result, requestId, { ...limitHeaders, "cache-control": "no-store" });
    } catch (err) {
      // The browser went away (react-query cancels a superseded page): nothing to report.
      res = req.signal.aborted ? new Response(null, { status: 499 }) : errorResponse(err, requestId);
    }
    return observeResponse(req, context, { requestId, startedAt, teamId }, res);
  };
}

/**
 * Refuses requests a browser made for another site: `Sec-Fetch-Site` (sent by every current
 * browser, on GET too) must be same-origin, or none (typed or bookmarked); a foreign `Origin` is
 * refused as well, for browsers that send no fetch metadata. Non-browser clients send neither.
 * The origin may be the request's host, or `PUBLIC_URL`'s: a reverse proxy that passes its own
 * upstream address as Host (nginx's plain `proxy_pass` sends `127.0.0.1:3000`) had every
 * dashboard change refused as cross-origin.
 */
function assertSameOrigin(req: Request): void {
  const site = req.headers.get("sec-fetch-site");
  if (site && site !== "same-origin" && site !== "none") throw forbidden("Cross-site request refused.");
  const origin = req.headers.get("origin");
  if (!origin) return; // not a browser, or a same-origin request of an older browser
  const host = req.headers.get("x-forwarded-host") ?? req.headers.get("host");
  let originHost: string;
  try {
    originHost = new URL(origin).host;
  } catch {
    throw forbidden("Cross-origin request refused.");
  }
  if (originHost !== host && origin !== new URL(env().PUBLIC_URL).origin)
    throw forbidden("Cross-origin request refused.");
}
