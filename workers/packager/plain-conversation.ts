import type { InvalidReason } from "@/lib/contracts/dataset-options";

// Bytes that never occur in UTF-8: they frame a conversation's key (conversationKey in
// sample-checks.ts) so that no two conversations share one, whatever their text holds.
export const KEY_END = 0xff;
export const KEY_JSON = 0xfe;
export const KEY_NULL = 0xfd;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LINE_PREFIX = Buffer.from('{"messages": ');
const RECORD_KEY = Buffer.from(', "messages": ');
const MESSAGE_START = Buffer.from('{"role": ');
const CONTENT_KEY = Buffer.from(', "content": ');
const ROLES = ["system", "user", "assistant", "tool"].map((r) => Buffer.from(r));
/** roleOf's answers: an index into ROLES, or UNKNOWN. */
const SYSTEM = 0;
const ASSISTANT = 2;
const UNKNOWN = ROLES.length;
/** The one-character JSON escapes, by the byte after the backslash. */
const ESCAPED = new Int16Array(128).fill(-1);
for (const [c, b] of [
  ['"', 0x22],
  ["\\", 0x5c],
  ["/", 0x2f],
  ["b", 0x08],
  ["f", 0x0c],
  ["n", 0x0a],
  ["r", 0x0d],
  ["t", 0x09],
] as const)
  ESCAPED[c.charCodeAt(0)] = b;

/**
 * A sample's conversation read straight off the bytes of its line, for `validate` and `dedupe`
 * without `JSON.parse` (which costs more than everything else packaging does per sample).
 *
 * Postgres renders a stored `jsonb` in one canonical way: keys ordered by length then bytes,
 * `", "` and `": "` between items, only `"`, `\` and control characters escaped, everything else
 * as UTF-8. A conversation whose messages are all `{"role": "…", "content": "…"}` (no tool calls,
 * no names, no null or structured content) therefore has exactly this shape, which `read` checks
 * byte by byte. It returns false for anything else (the caller then parses the line and gets the
 * same answers from sample-checks.ts): this is a shortcut for the common case, never a second
 * definition of the rules.
 *
 * After a successful `read`, `refusal` is what openAiChatRefusal would say, and `key` (its first
 * `keyLength` bytes) the bytes conversationKey (sample-checks.ts) gives the parsed messages:
 * per message its role, KEY_END, its content unescaped and trimmed as `String.prototype.trim`
 * does, KEY_END, KEY_END (no other field).
 */
export class PlainConversation {
  key: Buffer = Buffer.allocUnsafe(4096);
  keyLength = 0;
  refusal: InvalidReason | undefined;

  /**
   * The conversation of `data[start, end)`: a JSONL line (`{"messages": [...]}`) or a Parquet
   * record line (`{"id": …, "messages": [...]}`, the messages last). False when it is not plain.
   */
  read(data: Buffer, start: number, end: number): boolean {
    let at: number;
    if (startsWith(data, start, LINE_PREFIX)) at = start + LINE_PREFIX.length;
    else {
      // A record's other fields are numbers and escaped strings: the first unescaped
      // `, "messages": ` is the key (Buffer.indexOf reads past `end` only when it is absent).
      const k = data.indexOf(RECORD_KEY, start);
      if (k < 0 || k >= end) return false;
      at = k + RECORD_KEY.length;
    }
    if (data[end - 1] !== 0x7d /* } */ || data[at] !== 0x5b /* [ */) return false;
    const last = end - 2; // the array's `]`
    if (data[last] !== 0x5d) return false;
    at++;
    // The key is never longer than the line: unescaping only shortens a string, and a message's
    // three framing bytes stand in for its 27 bytes of keys, quotes and braces.
    if (this.key.length < end - start) this.key = Buffer.allocUnsafe(end - start);
    const key = this.key;
    let length = 0;
    let unknownRole = false;
    let emptyContent = false;
    let lateSystem = false;
    let assistant = false;
    for (let i = 0; at < last; i++) {
      if (i > 0) {
        if (data[at] !== 0x2c || data[at + 1] !== 0x20) return false;
        at += 2;
      }
      if (!startsWith(data, at, MESSAGE_START)) return false;
      at += MESSAGE_START.length;
      const roleStart = length;
      const afterRole = this.unescape(data, at, last, length);
      if (afterRole < 0) return false;
      const role = roleOf(key, roleStart, this.written);
      length = this.written;
      key[length++] = KEY_END;
      at = afterRole;
      if (!startsWith(data, at, CONTENT_KEY)) return false;
      at += CONTENT_KEY.length;
      const contentStart = length;
      const afterContent = this.unescape(data, at, last, length);
      if (afterContent < 0 || data[afterContent] !== 0x7d) return false;
      at = afterContent + 1;
      length = trim(key, contentStart, this.written);
      key[length++] = KEY_END;
      key[length++] = KEY_END;
      if (role === UNKNOWN) unknownRole = true;
      if (this.written === contentStart) emptyContent = true;
      if (role === SYSTEM && i > 0) lateSystem = true;
      if (role === ASSISTANT) assistant = true;
    }
    if (at !== last) return false;
    this.keyLength = length;
    this.refusal = unknownRole
      ? "unknown_role"
      : emptyContent
        ? "empty_content"
        : lateSystem
          ? "system_not_first"
          : !assistant
            ? "no_assistant_message"
            : undefined;
    return true;
  }

  /** Where the last unescape stopped writing (key bytes [to, written)). */
  private written = 0;

  /**
   * The JSON string at `data[at]` unescaped into `key` from `to`; the position after its closing
   * quote, or -1 when it is not a string this reader takes (a `\u` escape beyond ASCII, which
   * Postgres never writes, or a raw control character).
   */
  private unescape(data: Buffer, at: number, limit: number, to: number): number {
    if (data[at] !== QUOTE) return -1;
    const key = this.key;
    for (let i = at + 1; i < limit; i++) {
      const b = data[i]!;
      if (b === QUOTE) {
        this.written = to;
        return i + 1;
      }
      if (b === BACKSLASH) {
        const e = data[++i]!;
        if (e === 0x75 /* u */) {
          const code = hex4(data, i + 1);
          if (code < 0 || code >= 0x80) return -1;
          key[to++] = code;
          i += 4;
        } else {
          const c = e < 128 ? ESCAPED[e]! : -1;
          if (c < 0) return -1;
          key[to++] = c;
        }
      } else if (b < 0x20) return -1;
      else key[to++] = b;
    }
    return -1;
  }
}

function startsWith(data: Buffer, at: number, literal: Buffer): boolean {
  for (let i = 0; i < literal.length; i++) if (data[at + i] !== literal[i]) return false;
  return true;
}

function roleOf(key: Buffer, start: number, end: number): number {
  roles: for (let r = 0; r < ROLES.length; r++) {
    const name = ROLES[r]!;
    if (name.length !== end - start) continue;
    for (let i = 0; i < name.length; i++) if (key[start + i] !== name[i]) continue roles;
    return r;
  }
  return UNKNOWN;
}

function hex4(data: Buffer, at: number): number {
  let v = 0;
  for (let i = at; i < at + 4; i++) {
    const c = data[i]!;
    const d =
      c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : c >= 0x41 && c <= 0x46 ? c - 0x37 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/**
 * `key[start, end)` (UTF-8) without the leading and trailing characters `String.prototype.trim`
 * removes (ECMAScript's WhiteSpace and LineTerminator: tab, line feed, vertical tab, form feed,
 * carriage return, space, U+00A0, U+1680, U+2000–U+200A, U+2028, U+2029, U+202F, U+205F, U+3000,
 * U+FEFF), moved to `start`; returns the new end.
 */
function trim(key: Buffer, start: number, end: number): number {
  let from = start;
  for (let n = spaceAt(key, from, end); n > 0; n = spaceAt(key, from, end)) from += n;
  let to = end;
  for (let n = spaceBefore(key, from, to); n > 0; n = spaceBefore(key, from, to)) to -= n;
  if (from > start) key.copyWithin(start, from, to);
  return start + (to - from);
}

/** The byte length of the trimmed character at `key[at]`, or 0. */
function spaceAt(key: Buffer, at: number, end: number): number {
  if (at >= end) return 0;
  const b = key[at]!;
  if (b === 0x20 || (b >= 0x09 && b <= 0x0d)) return 1;
  if (b === 0xc2) return at + 1 < end && key[at + 1] === 0xa0 ? 2 : 0;
  if (b < 0xe1 || at + 2 >= end) return 0;
  return isSpace3(b, key[at + 1]!, key[at + 2]!) ? 3 : 0;
}

/** The byte length of the trimmed character that ends at `key[end - 1]`, or 0. */
function spaceBefore(key: Buffer, start: number, end: number): number {
  if (end <= start) return 0;
  const b = key[end - 1]!;
  if (b === 0x20 || (b >= 0x09 && b <= 0x0d)) return 1;
  if (b === 0xa0 && end - 2 >= start && key[end - 2] === 0xc2) return 2;
  if (end - 3 < start) return 0;
  return isSpace3(key[end - 3]!, key[end - 2]!, b) ? 3 : 0;
}

/** The three-byte UTF-8 characters among them. */
function isSpace3(a: number, b: number, c: number): boolean {
  if (a === 0xe2) {
    if (b === 0x80) return c <= 0x8a ? c >= 0x80 : c === 0xa8 || c === 0xa9 || c === 0xaf;
    return b === 0x81 && c === 0x9f;
  }
  if (a === 0xe1) return b === 0x9a && c === 0x80;
  if (a === 0xe3) return b === 0x80 && c === 0x80;
  return a === 0xef && b === 0xbb && c === 0xbf;
}
