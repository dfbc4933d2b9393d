import { open } from "node:fs/promises";

/**
 * Joins Parquet files that share one schema into one file, row group by row group, without
 * decoding a page: the files' row groups (their column chunks, bloom filters and page indexes) are
 * copied as they are, one file after the other, and a new footer lists them all with their offsets
 * moved to where they now lie. This is what lets the packager convert a large dataset in parts while
 * its rows still arrive (parquet-file.ts), and still store one file.
 *
 * The footer is Thrift's compact protocol. It is decoded into a tree that keeps every field with its
 * wire type, so that fields this code does not know (newer statistics, key-value metadata) are written
 * back unchanged; only the fields that hold file offsets, row counts and ordinals are changed. Field
 * numbers are those of parquet.thrift (apache/parquet-format).
 */

/** Compact protocol wire types. */
const T = {
  STOP: 0,
  TRUE: 1,
  FALSE: 2,
  BYTE: 3,
  I16: 4,
  I32: 5,
  I64: 6,
  DOUBLE: 7,
  BINARY: 8,
  LIST: 9,
  SET: 10,
  MAP: 11,
  STRUCT: 12,
} as const;

type Value = bigint | number | boolean | Buffer | Field[] | ListValue | MapValue;
interface Field {
  id: number;
  type: number;
  value: Value;
}
interface ListValue {
  elementType: number;
  items: Value[];
}
interface MapValue {
  keyType: number;
  valueType: number;
  entries: [Value, Value][];
}

/** The four bytes a Parquet file starts and ends with. */
export const PARQUET_MAGIC = Buffer.from("PAR1");

/** FileMetaData, RowGroup, ColumnChunk and ColumnMetaData fields used here (parquet.thrift). */
const FILE = { NUM_ROWS: 3, ROW_GROUPS: 4, SCHEMA: 2 } as const;
const ROW_GROUP = { COLUMNS: 1, NUM_ROWS: 3, FILE_OFFSET: 5, ORDINAL: 7 } as const;
const COLUMN_CHUNK = { FILE_OFFSET: 2, META_DATA: 3, OFFSET_INDEX_OFFSET: 4, COLUMN_INDEX_OFFSET: 6 } as const;
/** ColumnMetaData: data_page_offset, index_page_offset, dictionary_page_offset, bloom_filter_offset. */
const COLUMN_META_OFFSETS = [9, 10, 11, 14];

class Reader {
  at = 0;
  constructor(private readonly buf: Buffer) {}

  byte(): number {
    if (this.at >= this.buf.length) throw new Error("the Parquet footer ends early");
    return this.buf[this.at++]!;
  }

  varint(): bigint {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const b = this.byte();
      result |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return result;
      shift += 7n;
      if (shift > 70n) throw new Error("a varint in the Parquet footer is too long");
    }
  }

  zigzag(): bigint {
    const n = this.varint();
    return (n >> 1n) ^ -(n & 1n);
  }

  bytes(n: number): Buffer {
    if (this.at + n > this.buf.length) throw new Error("the Parquet footer ends early");
    const out = this.buf.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }

  value(type: number): Value {
    switch (type) {
      case T.TRUE:
        return true;
      case T.FALSE:
        return false;
      case T.BYTE:
        return this.bytes(1).readInt8(0);
      case T.I16:
      case T.I32:
        return Number(this.zigzag());
      case T.I64:
        return this.zigzag();
      case T.DOUBLE:
        return this.bytes(8);
      case T.BINARY:
        return this.bytes(Number(this.varint()));
      case T.LIST:
      case T.SET: {
        const head = this.byte();
        const elementType = head & 0x0f;
        const size = head >> 4 === 15 ? Number(this.varint()) : head >> 4;
        const items: Value[] = [];
        for (let i = 0; i < size; i++) {
          // A boolean in a list is a byte of its own: 1 true, anything else false.
          items.push(elementType === T.TRUE || elementType === T.FALSE ? this.byte() === 1 : this.value(elementType));
        }
        return { elementType, items };
      }
      case T.MAP: {
        const size = Number(this.varint());
        const types = size ? this.byte() : 0;
        const keyType = types >> 4;
        const valueType = types & 0x0f;
        const entries: [Value, Value][] = [];
        for (let i = 0; i < size; i++) entries.push([this.value(keyType), this.value(valueType)]);
        return { keyType, valueType, entries };
      }
      case T.STRUCT:
        return this.struct();
      default:
        throw new Error(`unknown Thrift type ${type} in the Parquet footer`);
    }
  }

  struct(): Field[] {
    const fields: Field[] = [];
    let id = 0;
    for (;;) {
      const head = this.byte();
      const type = head & 0x0f;
      if (type === T.STOP) return fields;
      id = head >> 4 ? id + (head >> 4) : Number(this.zigzag());
      fields.push({ id, type, value: this.value(type) });
    }
  }
}

class Writer {
  private chunks: Buffer[] = [];
  private scratch: number[] = [];

  private flush(): void {
    if (this.scratch.length) this.chunks.push(Buffer.from(this.scratch));
    this.scratch = [];
  }

  byte(b: number): void {
    this.scratch.push(b & 0xff);
  }

  varint(n: bigint): void {
    do {
      const b = Number(n & 0x7fn);
      n >>= 7n;
      this.byte(n ? b | 0x80 : b);
    } while (n);
  }

  zigzag(n: bigint): void {
    this.varint(BigInt.asUintN(64, (n << 1n) ^ (n >> 63n)));
  }

  raw(b: Buffer): void {
    this.flush();
    this.chunks.push(b);
  }

  value(type: number, v: Value): void {
    switch (type) {
      case T.TRUE:
      case T.FALSE:
        return; // in the field header
      case T.BYTE:
        return this.byte(v as number);
      case T.I16:
      case T.I32:
        return this.zigzag(BigInt(v as number));
      case T.I64:
        return this.zigzag(v as bigint);
      case T.DOUBLE:
        return this.raw(v as Buffer);
      case T.BINARY:
        this.varint(BigInt((v as Buffer).length));
        return this.raw(v as Buffer);
      case T.LIST:
      case T.SET: {
        const { elementType, items } = v as ListValue;
        if (items.length < 15) this.byte((items.length << 4) | elementType);
        else {
          this.byte(0xf0 | elementType);
          this.varint(BigInt(items.length));
        }
        for (const item of items) {
          if (elementType === T.TRUE || elementType === T.FALSE) this.byte(item ? 1 : 2);
          else this.value(elementType, item);
        }
        return;
      }
      case T.MAP: {
        const { keyType, valueType, entries } = v as MapValue;
        this.varint(BigInt(entries.length));
        if (entries.length) this.byte((keyType << 4) | valueType);
        for (const [key, value] of entries) {
          this.value(keyType, key);
          this.value(valueType, value);
        }
        return;
      }
      case T.STRUCT:
        return this.struct(v as Field[]);
      default:
        throw new Error(`unknown Thrift type ${type}`);
    }
  }

  struct(fields: Field[]): void {
    let last = 0;
    for (const f of fields) {
      const type = f.type === T.TRUE || f.type === T.FALSE ? (f.value ? T.TRUE : T.FALSE) : f.type;
      const delta = f.id - last;
      if (delta > 0 && delta < 16) this.byte((delta << 4) | type);
      else {
        this.byte(type);
        this.zigzag(BigInt(f.id));
      }
      this.value(type, f.value);
      last = f.id;
    }
    this.byte(T.STOP);
  }

  done(): Buffer {
    this.flush();
    return Buffer.concat(this.chunks);
  }
}

const field = (fields: Field[], id: number) => fields.find((f) => f.id === id);

/** Adds `shift` to an offset field that is set (an offset is never below 4: the magic comes first). */
function moveOffset(fields: Field[], id: number, shift: bigint): void {
  const f = field(fields, id);
  if (f && f.type === T.I64 && (f.value as bigint) >= 4n) f.value = (f.value as bigint) + shift;
}

/** Where one Parquet file's row groups lie, and its decoded footer. */
export interface ParquetPart {
  file: string;
  /** Bytes [4, bodyEnd) hold the row groups, their bloom filters and page indexes. */
  bodyEnd: number;
  footer: Field[];
}

/** Reads a Parquet file's footer. */
export async function readParquetPart(file: string): Promise<ParquetPart> {
  const handle = await open(file);
  try {
    const { size } = await handle.stat();
    const tail = Buffer.alloc(8);
    if (size < 12) throw new Error("not a Parquet file");
    await handle.read(tail, 0, 8, size - 8);
    if (!tail.subarray(4).equals(PARQUET_MAGIC)) throw new Error("not a Parquet file");
    const length = tail.readUInt32LE(0);
    if (length + 12 > size) throw new Error("the Parquet footer is longer than the file");
    const bytes = Buffer.alloc(length);
    await handle.read(bytes, 0, length, size - 8 - length);
    return { file, bodyEnd: size - 8 - length, footer: new Reader(bytes).struct() };
  } finally {
    await handle.close();
  }
}

/**
 * The footer (with its length and the closing magic) of the file made of `parts` in order: the
 * magic, then each part's bytes [4, bodyEnd), then this. Parts without rows add nothing (but at
 * least one part is needed, for the schema). The parts' footers are changed: join them once.
 */
export function joinedParquetFooter(parts: ParquetPart[]): Buffer {
  if (!parts.length) throw new Error("no Parquet file to join");
  const schema = (p: ParquetPart) => {
    const w = new Writer();
    w.value(T.LIST, field(p.footer, FILE.SCHEMA)!.value);
    return w.done();
  };
  const first = parts[0]!;
  const firstSchema = schema(first);
  const rowGroups: Value[] = [];
  let rows = 0n;
  let at = 4; // where the next part's body goes in the joined file
  for (const part of parts) {
    if (!schema(part).equals(firstSchema)) throw new Error("the Parquet files to join have different schemas");
    const shift = BigInt(at - 4);
    const groups = field(part.footer, FILE.ROW_GROUPS);
    for (const g of groups ? (groups.value as ListValue).items : []) {
      const group = g as Field[];
      moveOffset(group, ROW_GROUP.FILE_OFFSET, shift);
      const ordinal = field(group, ROW_GROUP.ORDINAL);
      if (ordinal) ordinal.value = rowGroups.length;
      for (const c of (field(group, ROW_GROUP.COLUMNS)!.value as ListValue).items) {
        const chunk = c as Field[];
        moveOffset(chunk, COLUMN_CHUNK.FILE_OFFSET, shift);
        moveOffset(chunk, COLUMN_CHUNK.OFFSET_INDEX_OFFSET, shift);
        moveOffset(chunk, COLUMN_CHUNK.COLUMN_INDEX_OFFSET, shift);
        const meta = field(chunk, COLUMN_CHUNK.META_DATA);
        if (meta) for (const id of COLUMN_META_OFFSETS) moveOffset(meta.value as Field[], id, shift);
      }
      rows += field(group, ROW_GROUP.NUM_ROWS)!.value as bigint;
      rowGroups.push(group);
    }
    at += part.bodyEnd - 4;
  }
  const footer = first.footer.map((f) => ({ ...f }));
  field(footer, FILE.NUM_ROWS)!.value = rows;
  const groupsField = field(footer, FILE.ROW_GROUPS);
  if (groupsField) groupsField.value = { elementType: T.STRUCT, items: rowGroups };
  const w = new Writer();
  w.struct(footer);
  const body = w.done();
  const length = Buffer.alloc(4);
  length.writeUInt32LE(body.length);
  return Buffer.concat([body, length, PARQUET_MAGIC]);
}
