import { notFound } from "@/lib/errors";
import { errorResponse, newRequestId } from "@/lib/http/respond";

export const dynamic = "force-dynamic";

// Unknown /v1 paths answer with the API's error body rather than the HTML 404 page.
function unknownRoute(req: Request): Response {
  return errorResponse(notFound(`No such endpoint: ${req.method} ${new URL(req.url).pathname}`), newRequestId());
}

export const GET = unknownRoute;
export const POST = unknownRoute;
export const PUT = unknownRoute;
export const PATCH = unknownRoute;
export const DELETE = unknownRoute;
