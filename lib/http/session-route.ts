import type { z } from "zod";
import { currentTeamContext, type TeamContext } from "../auth/session";
import { getDb, type DbHandle } from "../db/client";
import { ApiError, forbidden } from "../errors";
import { errorResponse, newRequestId } from "./respond";
import { handlerResponse, routeParams, validBody, type RouteContext } from "./route-parts";

type Options<B extends z.ZodType | undefined, A extends "session" | "none"> = {
  /** `session` (default): a signed-in user with a team. `none`: public (sign-up). */
  auth?: A;
  /** Zod schema of the JSON body (the same contract as the hosted API where there is one). */
  body?: B;
};

type Handler<B extends z.ZodType | undefined, A extends "session" | "none"> = (ctx: {
  req: Request;
  requestId: string;
  handle: DbHandle;
  params: Record<string, string>;
  body: B extends z.ZodType ? z.infer<B> : undefined;
  session: A extends "session" ? TeamContext : undefined;
}) => Promise<Response | unknown>;

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
    try {
      // Session cookies are SameSite=Lax; refusing a foreign Origin on writes closes the rest of CSRF.
      if (req.method !== "GET" && req.method !== "HEAD") assertSameOrigin(req);
      const handle = getDb();
      let session: TeamContext | undefined;
      if ((options.auth ?? "session") === "session") {
        session = (await currentTeamContext()) ?? undefined;
        if (!session) throw unsignedIn();
      }
      const body = await validBody(req, options.body);
      const params = await routeParams(context);
      const result = await handler({ req, requestId, handle, params, body: body as never, session: session as never });
      return handlerResponse(result, requestId, { "cache-control": "no-store" });
    } catch (err) {
      // The browser went away (react-query cancels a superseded page): nothing to report.
      if (req.signal.aborted) return new Response(null, { status: 499 });
      return errorResponse(err, requestId);
    }
  };
}

function assertSameOrigin(req: Request): void {
  const origin = req.headers.get("origin");
  if (!origin) return; // not a browser, or a same-origin request of an older browser
  const host = req.headers.get("x-forwarded-host") ?? req.headers.get("host");
  let originHost: string;
  try {
    originHost = new URL(origin).host;
  } catch {
    throw forbidden("Cross-origin request refused.");
  }
  if (originHost !== host) throw forbidden("Cross-origin request refused.");
}
