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
  const headers: Record<string, string> = {
    "content-type": contentTypeOf(name),
    "content-disposition": `attachment; filename="${name}"`,
    "cache-control": "private, no-store",
    "accept-ranges": "bytes",
  };
  // One byte range (a resumed download, `curl -C -`; Parquet readers over HTTP read the footer
  // first): 206 with that part. Before, every request got the whole file.
  const range = byteRange(req.headers.get("range"), file.size);
  if (range === "unsatisfiable")
    return Response.json(
      {
        error: {
          type: "invalid_request",
          message: `The range is past the end of the file (${file.size} bytes).`,
          param: "Range",
        },
      },
      { status: 416, headers: { "content-range": `bytes */${file.size}`, "cache-control": "private, no-store" } },
    );
  if (range)
    return new Response(file.stream(range), {
      status: 206,
      headers: {
        ...headers,
        "content-length": String(range.end - range.start + 1),
        "content-range": `bytes ${range.start}-${range.end}/${file.size}`,
      },
    });
  return new Response(file.stream(), { headers: { ...headers, "content-length": String(file.size) } });
});

/**
 * The one range of a `Range: bytes=…` header (`a-b`, `a-`, `-n`), `end` inclusive; undefined to
 * send the whole file (no header, another unit, several ranges: RFC 9110 lets a server ignore
 * them), or "unsatisfiable" for a range past the end.
 */
function byteRange(header: string | null, size: number): { start: number; end: number } | "unsatisfiable" | undefined {
  const m = header?.trim().match(/^bytes=(\d*)-(\d*)$/);
  if (!m || (m[1] === "" && m[2] === "")) return undefined;
  if (m[1] === "") {
    const suffix = Number(m[2]);
    if (suffix === 0 || size === 0) return "unsatisfiable";
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || end < start) return "unsatisfiable";
  return { start, end };
}

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
