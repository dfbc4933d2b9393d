import { SelectionBody } from "@/lib/contracts/pipelines";
import { apiRoute } from "@/lib/http/api-route";
import { releasingAfter, takeQuerySlot } from "@/lib/limits/team-queries";
import { jsonArrayStream } from "@/lib/http/json-stream";
import { getPipeline } from "@/lib/services/pipelines";
import { resolveCursor, streamSelection } from "@/lib/services/samples";
import { otherMethods } from "@/lib/http/other-methods";
import { abortOnRevoke } from "@/lib/services/key-watch";

export const dynamic = "force-dynamic";

// The array is streamed from a database cursor: memory stays flat however many samples match.
// A key revoked while its array is still being sent ends it there (the body is cut): a slow
// reader of a leaked key does not keep reading the pipeline for hours after the revocation.
export const POST = apiRoute({ body: SelectionBody }, async ({ req, startedAt, handle, principal, params, body }) => {
  const pipeline = await getPipeline(handle.db, { teamId: principal.team.id, id: params.id! });
  // The cursor is resolved before the stream starts: an unknown `after` is a 400, not a cut array.
  const cursor = await resolveCursor(handle.db, pipeline.id, body.after);
  // One of the team's query slots, held until the array has been sent (or given up).
  const release = await takeQuerySlot(principal.team.id);
  const rows = streamSelection(handle.db, { pipelineId: pipeline.id, selection: body, cursor });
  const watch = abortOnRevoke(handle.sql, principal.key, startedAt, req.signal);
  const stream = jsonArrayStream(untilAborted(releasingAfter(rows, release), watch));
  return new Response(stream, { headers: { "content-type": "application/json; charset=utf-8" } });
});

export const { GET, PUT, PATCH, DELETE } = otherMethods("POST");

/** `rows` until `watch.signal` aborts (then its reason is thrown, which cuts the body); unwatches at the end. */
async function* untilAborted<T>(
  rows: AsyncIterable<T>,
  watch: { signal: AbortSignal; unwatch: () => void },
): AsyncIterable<T> {
  try {
    for await (const row of rows) {
      watch.signal.throwIfAborted();
      yield row;
    }
  } finally {
    watch.unwatch();
  }
}
