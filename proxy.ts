import type { NextRequest } from "next/server";
import { NextResponse } from "next/server";
import { REQUEST_PATH_HEADER } from "@/lib/auth/request-path";

// Tells the dashboard's layout which page was asked for: a signed-out visitor of a deep link
// (a pipeline with its filters, a dataset) is sent to sign-in with that link as the way back,
// where the layout alone would only know "/pipelines". Only the dashboard's pages pass through
// here: the API, the deployment endpoints and the assets pay nothing for it.
export function proxy(request: NextRequest) {
  const headers = new Headers(request.headers);
  headers.set(REQUEST_PATH_HEADER, `${request.nextUrl.pathname}${request.nextUrl.search}`);
  return NextResponse.next({ request: { headers } });
}

// Next reads this statically: a literal list, one entry per folder of app/(dashboard)
// (proxy.test.ts keeps the two equal).
export const config = {
  matcher: [
    "/pipelines/:path*",
    "/datasets/:path*",
    "/deployments/:path*",
    "/playground/:path*",
    "/usage/:path*",
    "/settings/:path*",
    "/api-reference/:path*",
  ],
};
