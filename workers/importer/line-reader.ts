/**
 * The lines of a byte stream, each with its number and the file offset just after it (where a
 * resumed read starts). A line longer than `maxBytes` is not buffered: it is reported as
 * `tooLong` (its bytes are skipped as they arrive), so one huge line never holds the file in
 * memory. Lines end with `\n`; a last line without one still counts.
 */
export type Line = { number: number; end: number } & ({ bytes: Buffer; tooLong: false } | { tooLong: true });

export async function* readLines(
  source: AsyncIterable<Uint8Array>,
  options: { start: number; firstLine: number; maxBytes: number },
): AsyncGenerator<Line> {
  let offset = options.start; // file offset of the first byte of `parts`
  let number = options.firstLine;
  let parts: Buffer[] = [];
  let partBytes = 0;
  let skipping = false; // inside a line that is already too long
  for await (const raw of source) {
    const chunk = Buffer.isBuffer(raw) ? raw : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
    let from = 0;
    for (let nl = chunk.indexOf(0x0a); nl !== -1; nl = chunk.indexOf(0x0a, from)) {
      const end = offset + partBytes + (nl - from) + 1;
      if (skipping || partBytes + (nl - from) > options.maxBytes) {
        yield { number: number++, end, tooLong: true };
      } else {
        const piece = chunk.subarray(from, nl);
        const bytes = parts.length === 0 ? piece : Buffer.concat([...parts, piece]);
        yield { number: number++, end, bytes, tooLong: false };
      }
      offset = end;
      parts = [];
      partBytes = 0;
      skipping = false;
      from = nl + 1;
    }
    const rest = chunk.length - from;
    if (rest > 0) {
      if (!skipping && partBytes + rest > options.maxBytes) {
        skipping = true;
        parts = [];
      }
      if (!skipping) parts.push(Buffer.from(chunk.subarray(from))); // a copy: the source may reuse its buffer
      partBytes += rest;
    }
  }
  if (partBytes > 0) {
    const end = offset + partBytes;
    if (skipping) yield { number, end, tooLong: true };
    else yield { number, end, bytes: Buffer.concat(parts), tooLong: false };
  }
}
