// Liveness probe, and the "empty route" the ingest benchmark compares against.
export const dynamic = "force-dynamic";
export function GET(): Response {
  return Response.json({ ok: true });
}
