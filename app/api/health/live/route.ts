// Liveness: the process answers (no I/O). Also the "empty route" the ingest benchmark compares against.
export const dynamic = "force-dynamic";
export function GET(): Response {
  return Response.json({ ok: true });
}
