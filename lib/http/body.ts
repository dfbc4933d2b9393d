import { invalidRequest, payloadTooLarge } from "../errors";

/**
 * Reads a JSON body with a byte limit (413 past it, checked against Content-Length first and
 * then while reading, so a lying or absent header cannot get a larger body in).
 * An empty body reads as `{}`: every operation whose fields are all optional works without one.
 */
export async function readJsonBody(req: Request, limit: number): Promise<unknown> {
  const declared = Number(req.headers.get("content-length"));
  if (Number.isFinite(declared) && declared > limit) throw payloadTooLarge(limit);
  if (!req.body) return {};
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      throw payloadTooLarge(limit);
    }
    chunks.push(value);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text);
  } catch (err) {
    throw invalidRequest(`Request body is not valid JSON: ${(err as Error).message}`);
  }
}
