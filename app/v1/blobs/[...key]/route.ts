import { blobStore, contentTypeOf, LocalBlobStore } from "@/lib/blob";
import { forbidden, notFound } from "@/lib/errors";
import { apiRoute } from "@/lib/http/api-route";
import { verifySignedUrl } from "@/lib/signing";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// Files of the local blob driver, behind a signed URL (the signature is the only credential).
// With the S3 driver, download URLs point at S3 and this route has nothing to serve.
export const GET = apiRoute({ auth: "none" }, async ({ req, params }) => {
  const check = verifySignedUrl(new URL(req.url));
  if (!check.ok) {
    throw forbidden(
      check.reason === "expired" ? "This signed URL has expired." : "This URL's signature is missing or invalid.",
    );
  }
  const blobs = blobStore();
  const file = blobs instanceof LocalBlobStore ? await blobs.open(params.key!).catch(() => undefined) : undefined;
  if (!file) throw notFound("This file no longer exists.");
  const name = params.key!.split("/").pop()!;
  return new Response(file.stream(), {
    headers: {
      "content-type": contentTypeOf(name),
      "content-length": String(file.size),
      "content-disposition": `attachment; filename="${name}"`,
      "cache-control": "private, no-store",
    },
  });
});

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
