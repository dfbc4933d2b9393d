import { describe, expect, it } from "vitest";
import { BinaryCopyRows } from "./copy-binary";

// A binary COPY stream as Postgres writes it (the documented file format): the signature, flags
// and an extension area, then per row its field count (int16) and each field as an int32 length
// and its bytes, then -1.
const int16 = (n: number) => Buffer.from([(n >> 8) & 0xff, n & 0xff]);
const int32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
};
const header = (extension = Buffer.alloc(0)) =>
  Buffer.concat([Buffer.from("PGCOPY\n\xff\r\n\0", "latin1"), int32(0), int32(extension.length), extension]);
const row = (...fields: Buffer[]) =>
  Buffer.concat([int16(fields.length), ...fields.flatMap((f) => [int32(f.length), f])]);
const TRAILER = int16(-1);

const fieldsOf = (reader: BinaryCopyRows, fields: number) => {
  const { buffers, bounds, count } = reader.take();
  expect(buffers.length).toBe(count);
  return buffers.map((data, r) =>
    Array.from({ length: fields }, (_, f) =>
      data.toString("utf8", bounds[2 * (r * fields + f)], bounds[2 * (r * fields + f) + 1]),
    ),
  );
};

describe("binary COPY rows", () => {
  const rows = [
    [Buffer.from('{"messages": [{"role": "user", "content": "a\\n\\"b\\""}]}'), int32(1)],
    [Buffer.from('{"messages": "é ✓"}'), int32(0)],
    [Buffer.from(""), int32(1)],
  ];
  const expected = rows.map(([line, side]) => [line!.toString(), side!.toString()]);

  it("reads each row where its message arrived, without copying it", () => {
    const reader = new BinaryCopyRows(2);
    const messages = [header(), ...rows.map((r) => row(...r)), TRAILER];
    for (const m of messages) reader.push(m);
    const { buffers } = reader.take();
    expect(buffers).toHaveLength(3);
    buffers.forEach((b, i) => expect(b).toBe(messages[i + 1]));
    expect(reader.ended).toBe(true);
  });

  it("gives every row and field wherever the stream is cut, with the header's extension skipped", () => {
    const stream = Buffer.concat([header(Buffer.from("ext")), ...rows.map((r) => row(...r)), TRAILER]);
    for (let a = 0; a <= stream.length; a++) {
      for (const b of [a, Math.min(stream.length, a + 1), Math.min(stream.length, a + 7), stream.length]) {
        const reader = new BinaryCopyRows(2);
        const got: string[][] = [];
        for (const part of [stream.subarray(0, a), stream.subarray(a, b), stream.subarray(b)]) {
          reader.push(part);
          got.push(...fieldsOf(reader, 2));
        }
        expect(got, `cut at ${a} and ${b}`).toEqual(expected);
        expect(reader.ended).toBe(true);
      }
    }
  });

  it("is not ended before the trailer, and ignores what follows it", () => {
    const reader = new BinaryCopyRows(1);
    reader.push(Buffer.concat([header(), row(Buffer.from("x"))]));
    expect(reader.ended).toBe(false);
    reader.push(Buffer.concat([TRAILER, row(Buffer.from("after"))]));
    expect(reader.ended).toBe(true);
    expect(fieldsOf(reader, 1)).toEqual([["x"]]);
  });

  it("refuses a text COPY, a row of another width and a NULL field", () => {
    expect(() => new BinaryCopyRows(1).push(Buffer.from('{"messages": []}\n{"messages": []}\n'))).toThrow(
      /not a binary COPY/,
    );
    expect(() => new BinaryCopyRows(1).push(Buffer.concat([header(), row(Buffer.from("a"), int32(1))]))).toThrow(
      /2 fields, not 1/,
    );
    expect(() => new BinaryCopyRows(1).push(Buffer.concat([header(), int16(1), int32(-1)]))).toThrow(/NULL/);
  });
});
