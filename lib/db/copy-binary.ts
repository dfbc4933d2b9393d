/** `PGCOPY\n\377\r\n\0`: the first 11 bytes of a binary COPY stream, then flags and an extension length. */
const SIGNATURE = Buffer.from([0x50, 0x47, 0x43, 0x4f, 0x50, 0x59, 0x0a, 0xff, 0x0d, 0x0a, 0x00]);
const HEADER_BYTES = SIGNATURE.length + 8;

/**
 * Rows that have arrived: row i lies in `buffers[i]`, its field f at
 * `[bounds[2 * (i * fields + f)], bounds[2 * (i * fields + f) + 1])`.
 */
export type CopyRowBatch = { buffers: Buffer[]; bounds: number[]; count: number };

/**
 * The rows of `COPY … TO STDOUT (FORMAT binary)`, message by message. A field's bytes come as
 * they are (no escaping to undo, on either side: text COPY escapes every backslash of JSON text,
 * and each one costs Postgres and the reader), each behind its length. Postgres sends each row in a
 * CopyData message of its own, so a row is read where it arrived, never copied; a row cut
 * between messages (which Postgres does not do) is put together first. `push` throws on a stream
 * that is not binary COPY or whose rows do not have `fields` fields, or a NULL field.
 */
export class BinaryCopyRows {
  private buffers: Buffer[] = [];
  private bounds: number[] = [];
  private header = true;
  private pending: Buffer | undefined;
  /** True once the trailer (a field count of -1) arrived: the rows are complete. */
  ended = false;

  constructor(private readonly fields: number) {}

  /** Rows read since the last `take`. */
  get count(): number {
    return this.buffers.length;
  }

  push(message: Buffer): void {
    if (this.ended) return;
    const data = this.pending ? Buffer.concat([this.pending, message]) : message;
    this.pending = undefined;
    let at = 0;
    if (this.header) {
      if (data.length < HEADER_BYTES) {
        this.pending = data;
        return;
      }
      if (!data.subarray(0, SIGNATURE.length).equals(SIGNATURE)) throw new Error("not a binary COPY stream");
      const extension = data.readUInt32BE(SIGNATURE.length + 4);
      if (data.length < HEADER_BYTES + extension) {
        this.pending = data;
        return;
      }
      at = HEADER_BYTES + extension;
      this.header = false;
    }
    const fields = this.fields;
    const bounds = this.bounds;
    rows: while (at + 2 <= data.length) {
      const count = (data[at]! << 8) | data[at + 1]!;
      if (count === 0xffff) {
        this.ended = true;
        return;
      }
      if (count !== fields) throw new Error(`a binary COPY row of ${count} fields, not ${fields}`);
      const rowBounds = bounds.length;
      let p = at + 2;
      for (let f = 0; f < fields; f++) {
        if (p + 4 > data.length) {
          bounds.length = rowBounds;
          break rows;
        }
        const length = (data[p]! << 24) | (data[p + 1]! << 16) | (data[p + 2]! << 8) | data[p + 3]!;
        if (length < 0) throw new Error("a NULL field in a binary COPY row");
        p += 4;
        if (p + length > data.length) {
          bounds.length = rowBounds;
          break rows;
        }
        bounds.push(p, p + length);
        p += length;
      }
      this.buffers.push(data);
      at = p;
    }
    if (at < data.length) this.pending = data.subarray(at);
  }

  /** The rows read since the last call, handed over (this reader keeps none of them). */
  take(): CopyRowBatch {
    const batch = { buffers: this.buffers, bounds: this.bounds, count: this.buffers.length };
    this.buffers = [];
    this.bounds = [];
    return batch;
  }
}
