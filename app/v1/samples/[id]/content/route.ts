import { forbidden, notFound } from "@/lib/errors";
import { apiRoute } from "@/lib/http/api-route";
import { getSampleMessages } from "@/lib/services/samples";
import { verifySignedUrl } from "@/lib/signing";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// A sample's signed URL: the signature is the only credential. Tampered or expired: 403, no content.
export const GET = apiRoute({ auth: "none" }, async ({ req, handle, params }) => {
  const check = verifySignedUrl(new URL(req.url));
  if (!check.ok) {
    throw forbidden(
      check.reason === "expired" ? "This signed URL has expired." : "This URL's signature is missing or invalid.",
    );
  }
  const messages = await getSampleMessages(handle.db, params.id!);
  if (!messages) throw notFound("This sample no longer exists.");
  // Not kept by the browser: a sample deleted (a data owner's request) is gone at once, not after
  // a cache's minute.
  return Response.json(messages, { headers: { "cache-control": "private, no-store" } });
});

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
