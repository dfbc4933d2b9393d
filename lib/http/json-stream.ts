/**
 * A JSON array streamed item by item: `[`, items separated by commas, `]`. Pulls from the
 * source only as fast as the client reads, so memory stays flat. If the source fails midway
 * the connection is aborted (the client sees a truncated body, never a valid-looking array).
 */
export function jsonArrayStream<T>(source: AsyncIterable<T>, chunkItems = 100): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const iterator = source[Symbol.asyncIterator]();
  let first = true;
  let done = false;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (done) return;
        let text = first ? "[" : "";
        for (let i = 0; i < chunkItems; i++) {
          const next = await iterator.next();
          if (next.done) {
            done = true;
            controller.enqueue(encoder.encode(text + "]"));
            controller.close();
            return;
          }
          text += (first ? "" : ",") + JSON.stringify(next.value);
          first = false;
        }
        controller.enqueue(encoder.encode(text));
      },
      async cancel() {
        await iterator.return?.();
      },
    },
    { highWaterMark: 1 },
  );
}
