import { describe, expect, it } from "vitest";
import { PlainConversation } from "./plain-conversation";
import { conversationKey, openAiChatRefusal, type Message } from "./sample-checks";

// The reader must give, for every line it takes, exactly what parsing the line gives: the same
// refusal and the same key bytes. The lines are rendered as Postgres renders a jsonb (keys by
// length then bytes, ", " and ": " between items, only `"`, `\` and control characters escaped,
// as in its escape_json); tests/integration/datasets-options.test.ts runs the same cases through
// a real Postgres.

function pgString(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (ch === "\b") out += "\\b";
    else if (ch === "\f") out += "\\f";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (c < 0x20) out += `\\u${c.toString(16).padStart(4, "0")}`;
    else out += ch;
  }
  return out + '"';
}
const pgMessages = (messages: { role: string; content: string }[]) =>
  `[${messages.map((m) => `{"role": ${pgString(m.role)}, "content": ${pgString(m.content)}}`).join(", ")}]`;
const line = (messages: { role: string; content: string }[]) => `{"messages": ${pgMessages(messages)}}`;

/** What parsing the line says: the refusal and the key bytes. */
function parsed(text: string) {
  const messages = JSON.parse(text).messages as Message[];
  const key = conversationKey(messages, Buffer.alloc(16));
  return { refusal: openAiChatRefusal(messages), key: key.buffer.subarray(0, key.length).toString("hex") };
}

/** What the reader says, the line placed between other bytes as in a COPY chunk. */
function read(reader: PlainConversation, text: string) {
  const data = Buffer.from(`xx\t${text}\t1\n`);
  const start = 3;
  const end = start + Buffer.byteLength(text);
  if (!reader.read(data, start, end)) return undefined;
  return { refusal: reader.refusal, key: reader.key.subarray(0, reader.keyLength).toString("hex") };
}

// Every character String.prototype.trim removes, some it keeps, escapes, and multi-byte text.
const SPACES = ["\t", "\n", "\v", "\f", "\r", " ", "\u00a0", "\u1680", "\u2000", "\u2005", "\u200a"];
const MORE_SPACES = ["\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff"];
const KEPT = ["\u0085", "\u180e", "\u200b", "\u00ad", "\u0001", "\u001f", "\b", "\u007f", "\u2060", "\u00a1"];
const TEXT = ["a", "Z", "7", '"', "\\", "/", "é", "中", "😀", "{", "}", ",", ":", "[", "]", "u", "\\u"];
const ALPHABET = [...SPACES, ...MORE_SPACES, ...KEPT, ...TEXT];

/** A deterministic PRNG (mulberry32), so that a failure can be replayed. */
function prng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe("PlainConversation", () => {
  it("gives the refusal and the key that parsing gives, for every plain conversation", () => {
    const reader = new PlainConversation();
    const random = prng(7);
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)]!;
    const roles = ["system", "user", "assistant", "tool", "function", "", "users", "Assistant", "tool\n"];
    for (let n = 0; n < 3000; n++) {
      const messages = Array.from({ length: Math.floor(random() * 5) }, () => ({
        role: pick(roles),
        content: Array.from({ length: Math.floor(random() * 7) }, () => pick(ALPHABET)).join(""),
      }));
      const text = line(messages);
      expect(read(reader, text), text).toEqual(parsed(text));
    }
  });

  it("trims exactly what String.prototype.trim trims, at either end", () => {
    const reader = new PlainConversation();
    for (const ch of [...SPACES, ...MORE_SPACES, ...KEPT, "é", "中", "😀"]) {
      for (const content of [`${ch}x`, `x${ch}`, `${ch}${ch}x${ch}${ch}`, ch, `${ch}${ch}`]) {
        const text = line([{ role: "user", content }]);
        const got = read(reader, text)!;
        expect(got, JSON.stringify(content)).toEqual(parsed(text));
        const trimmed = Buffer.from(content.trim()).toString("hex");
        expect(got.key).toBe(Buffer.from("user").toString("hex") + "ff" + trimmed + "ffff");
      }
    }
  });

  it("reads a Parquet record line by its messages, which come last", () => {
    const reader = new PlainConversation();
    const messages = [
      { role: "user", content: ' "messages": [] ' },
      { role: "assistant", content: "ok" },
    ];
    const record =
      `{"id": "smp_1", "createdAt": 1700000000000000, "userId": "u \\", \\"messages\\": ", "groupId": null, ` +
      `"metadata": "{\\"a\\": \\"b\\"}", "messages": ${pgMessages(messages)}}`;
    expect(read(reader, record)).toEqual(parsed(record));
  });

  it("leaves every other shape to the parser, and takes no broken line", () => {
    const reader = new PlainConversation();
    const others = [
      '{"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function"}]}]}',
      '{"messages": [{"name": "n", "role": "user", "content": "x"}]}',
      '{"messages": [{"role": "user", "content": [{"text": "x", "type": "text"}]}]}',
      '{"messages": [{"role": "user"}]}',
      '{"messages": [{"role": 1, "content": "x"}]}',
      '{"messages": [{"role": "user", "content": "\\u00e9"}]}',
      '{"messages": [{"role": "user", "content": "x"},{"role": "user", "content": "y"}]}',
      '{"messages": {}}',
    ];
    for (const text of others) expect(read(reader, text), text).toBeUndefined();
    const whole = line([
      { role: "user", content: 'a "b" \\ \n c' },
      { role: "assistant", content: "d" },
    ]);
    expect(read(reader, whole)).toEqual(parsed(whole));
    // Every line one character short: what the reader still takes must parse to the same answers.
    for (let cut = 0; cut < whole.length; cut++) {
      for (const text of [whole.slice(0, cut) + "}", whole.slice(0, cut) + whole.slice(cut + 1)]) {
        const got = read(reader, text);
        if (got) expect(got, text).toEqual(parsed(text));
      }
    }
  });

  it("reads lines longer than its first key buffer, the shortest first", () => {
    const reader = new PlainConversation();
    for (const content of ["x", '\n"é中😀\t'.repeat(3000), " a ".repeat(5000)]) {
      const text = line([
        { role: "user", content },
        { role: "assistant", content: content.slice(0, 100) },
      ]);
      expect(read(reader, text)).toEqual(parsed(text));
    }
  });

  it("reads an empty conversation as one without an assistant message", () => {
    const reader = new PlainConversation();
    expect(read(reader, '{"messages": []}')).toEqual({ refusal: "no_assistant_message", key: "" });
  });
});
