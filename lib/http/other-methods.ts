// The methods an App Router route does not serve. Next answers them itself with a bare 405 (no
// body, no Allow, no request id); a route spreads these in instead, so that a wrong method gets
// the API's error body like every other error:
//   export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
import { methodNotAllowed } from "../errors";
import { errorResponse, newRequestId } from "./respond";

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;
type Method = (typeof METHODS)[number];
type Refusal = (req: Request) => Response;

/** 405 handlers, in the error shape with `Allow`, for every method but `allowed`. */
export function otherMethods<const A extends Method>(...allowed: A[]): Record<Exclude<Method, A>, Refusal> {
  // HEAD and OPTIONS: Next answers them for any route (HEAD as GET where there is one).
  const allow = [...allowed, ...(allowed.includes("GET" as A) ? ["HEAD"] : []), "OPTIONS"].join(", ");
  const refuse: Refusal = (req) => {
    const res = errorResponse(methodNotAllowed(req.method, allowed.join(" or ")), newRequestId());
    res.headers.set("allow", allow);
    return res;
  };
  return Object.fromEntries(METHODS.filter((m) => !allowed.includes(m as A)).map((m) => [m, refuse])) as Record<
    Exclude<Method, A>,
    Refusal
  >;
}
