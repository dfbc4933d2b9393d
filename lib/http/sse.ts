// Server-sent events: frame formatting and a Response that pulls frames from an async source
// only as fast as the client reads, and stops the source when the client goes away.

/** `data: …` (JSON unless a string such as "[DONE]"), optionally under an event name. */
export function sseFrame(data: unknown, event?: string): string {
  const text = typeof data === "string" ? data : JSON.stringify(data);
  return `${event ? `event: ${event}\n` : ""}data: ${text}\n\n`;
}

const encoder = new TextEncoder();

export const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache, no-transform",
  connection: "keep-alive",
  // Proxies such as nginx would otherwise buffer the stream and delay every token.
  "x-accel-buffering": "no",
};

/**
 * A streaming response of the frames `source` yields. When the client disconnects, the stream is
 * cancelled: `source.return()` runs (its finally blocks close the upstream) and `onCancel` fires
 * (it aborts the request to the worker, which cancels the generation).
 */
export function sseResponse(
  source: AsyncIterable<string>,
  options: { headers?: HeadersInit; onCancel?: () => void } = {},
): Response {
  const iterator = source[Symbol.asyncIterator]();
  const stream = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const next = await iterator.next();
          if (next.done) controller.close();
          else controller.enqueue(encoder.encode(next.value));
        } catch (err) {
          controller.error(err);
        }
      },
      async cancel() {
        options.onCancel?.();
        await iterator.return?.();
      },
    },
    { highWaterMark: 0 },
  );
  const headers = new Headers(options.headers);
  for (const [k, v] of Object.entries(SSE_HEADERS)) headers.set(k, v);
  return new Response(stream, { status: 200, headers });
}
