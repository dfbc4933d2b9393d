/**
 * Undoes the escaping of `COPY … TO STDOUT` in text format, chunk by chunk: a backslash starts
 * a two-byte sequence (`\\`, `\n`, `\r`, `\t`, `\b`, `\f`, `\v`; Postgres writes no other for
 * text values), which may be split across chunks. Rows end in a raw `\n`. A chunk without a
 * backslash (and none pending) is returned as is, without copying.
 */
export function copyTextUnescaper(): (chunk: Buffer) => Buffer {
  let pending = false;
  return (chunk) => {
    let next = chunk.indexOf(0x5c);
    if (next === -1 && !pending) return chunk;
    const out = Buffer.allocUnsafe(chunk.length);
    let o = 0;
    let start = 0;
    if (pending && chunk.length > 0) {
      out[o++] = unescaped(chunk[0]!);
      start = 1;
      pending = false;
      next = chunk.indexOf(0x5c, 1);
    }
    while (next !== -1) {
      o += chunk.copy(out, o, start, next);
      if (next + 1 === chunk.length) {
        pending = true;
        start = chunk.length;
        break;
      }
      out[o++] = unescaped(chunk[next + 1]!);
      start = next + 2;
      next = chunk.indexOf(0x5c, start);
    }
    if (start < chunk.length) o += chunk.copy(out, o, start);
    return out.subarray(0, o);
  };
}

const ESCAPES: Record<number, number> = { 0x6e: 0x0a, 0x72: 0x0d, 0x74: 0x09, 0x62: 0x08, 0x66: 0x0c, 0x76: 0x0b };
const unescaped = (byte: number) => ESCAPES[byte] ?? byte;

/** Number of `\n` bytes (rows, in COPY text output) in a chunk. */
export function countNewlines(chunk: Buffer): number {
  let n = 0;
  for (let i = chunk.indexOf(0x0a); i !== -1; i = chunk.indexOf(0x0a, i + 1)) n++;
  return n;
}

/**
 * A query with its parameters written in as literals, for the one statement that takes no
 * parameters: COPY. Strings become E'…' literals (backslash and quote escaped, whatever
 * standard_conforming_strings says); numbers must be finite. Only for SQL built here (the
 * placeholders `$n` must not occur inside the statement's own string literals).
 */
export function inlineParams(query: string, params: unknown[]): string {
  return query.replace(/\$(\d+)\b/g, (_, n: string) => literal(params[Number(n) - 1]));
}

function literal(value: unknown): string {
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  if (typeof value === "string") return `E'${value.replace(/\\/g, "\\\\").replace(/'/g, "''")}'`;
  if (value === null) return "null";
  throw new Error(`inlineParams: unsupported parameter ${typeof value}`);
}
