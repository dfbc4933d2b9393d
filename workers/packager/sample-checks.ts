import type { InvalidReason } from "@/lib/contracts/dataset-options";
import type { ToolCall } from "@/lib/contracts/messages";
import { murmur3x86128 } from "./murmur3";
import { KEY_END, KEY_JSON, KEY_NULL } from "./plain-conversation";

/** A stored message (lib/contracts/messages.ts); data inserted another way may hold any role. */
export type Message = {
  role: string;
  content?: string | null;
  name?: string;
  tool_call_id?: string;
  tool_calls?: ToolCall[];
};

const KNOWN_ROLES = new Set(["system", "user", "assistant", "tool"]);

/**
 * Why the OpenAI chat fine-tuning format refuses a conversation, or undefined when it takes it.
 * The first reason in this order counts: an unknown role, an empty content (an assistant message
 * with tool calls may have none), a system message after the first message, no assistant message.
 */
export function openAiChatRefusal(messages: Message[]): InvalidReason | undefined {
  if (messages.some((m) => !KNOWN_ROLES.has(m.role))) return "unknown_role";
  if (messages.some((m) => !m.tool_calls && !m.content)) return "empty_content";
  if (messages.some((m, i) => i > 0 && m.role === "system")) return "system_not_first";
  if (!messages.some((m) => m.role === "assistant")) return "no_assistant_message";
  return undefined;
}

/**
 * The conversations seen so far, as 128-bit digests (MurmurHash3 x86-128, murmur3.ts) of their
 * keys (conversationKey: each content trimmed, role, tool calls and the other fields as they are),
 * in an open-addressing table of 32-bit words: 16 bytes per slot, 32 bytes per conversation at
 * most (1M conversations: 32 MB), instead of a Set of strings (~100 MB). 128 bits make an
 * accidental collision as unlikely as with MD5 (about 10^-27 for a million conversations);
 * MurmurHash3 is not built to resist a deliberate one, which could only drop a sample from its
 * own team's dataset.
 */
export class SeenConversations {
  private slots: Uint32Array;
  private count = 0;
  /** conversationKey's bytes for `add`. */
  private scratch: Buffer = Buffer.allocUnsafe(4096);
  private readonly digest = new Int32Array(4);

  /** A table for about `expected` conversations (more are fine). */
  constructor(expected = 0) {
    // Sized for `expected` conversations at most half full, so a whole selection never regrows
    // the table (up to 2^20 of them: 32 MB; larger selections grow it as they go).
    let capacity = 4096;
    while (capacity < Math.min(expected, 1 << 20) * 2) capacity *= 2;
    this.slots = new Uint32Array(capacity * 4);
  }

  /** True the first time a conversation is added (the one to keep), false for its repeats. */
  add(messages: Message[]): boolean {
    const key = conversationKey(messages, this.scratch);
    this.scratch = key.buffer;
    return this.addKey(key.buffer, key.length);
  }

  /** The same, for a conversation's key already made (`key[0, length)`: PlainConversation's). */
  addKey(key: Buffer, length: number): boolean {
    const d = this.digest;
    murmur3x86128(key, length, 0, d);
    if (!this.insert(d[0]!, d[1]!, d[2]!, d[3]! | 1)) return false;
    if (++this.count * 2 > this.slots.length / 4) this.grow();
    return true;
  }

  /** false when present. The last word is never 0 (`| 1` above), so 0 marks an empty slot. */
  private insert(w0: number, w1: number, w2: number, w3: number): boolean {
    const slots = this.slots;
    const mask = slots.length / 4 - 1;
    // Uint32Array reads come back unsigned: compare the words as unsigned too.
    w0 >>>= 0;
    w1 >>>= 0;
    w2 >>>= 0;
    w3 >>>= 0;
    for (let i = w0 & mask; ; i = (i + 1) & mask) {
      const at = i * 4;
      if (slots[at + 3] === 0) {
        slots[at] = w0;
        slots[at + 1] = w1;
        slots[at + 2] = w2;
        slots[at + 3] = w3;
        return true;
      }
      if (slots[at] === w0 && slots[at + 1] === w1 && slots[at + 2] === w2 && slots[at + 3] === w3) return false;
    }
  }

  private grow(): void {
    const old = this.slots;
    this.slots = new Uint32Array(old.length * 2);
    for (let at = 0; at < old.length; at += 4) {
      if (old[at + 3] !== 0) this.insert(old[at]!, old[at + 1]!, old[at + 2]!, old[at + 3]!);
    }
  }
}

/**
 * The bytes a conversation is known by, written into `into` (a larger buffer when it is too
 * small; the one used is returned): per message its role, KEY_END, its content trimmed (or
 * KEY_JSON and the JSON of a content that is not a string, or KEY_NULL for none), KEY_END, the
 * JSON of its other fields if it has any (tool calls, ids, names), KEY_END. Those three bytes never
 * occur in UTF-8, so no two conversations share a key. PlainConversation gives the same bytes for
 * the lines it reads without parsing them.
 */
export function conversationKey(messages: Message[], into: Buffer): { buffer: Buffer; length: number } {
  let key = into;
  let length = 0;
  const put = (text: string) => {
    // Room for the text and the few framing bytes written before the next text.
    if (key.length < length + 3 * text.length + 8) {
      const bigger = Buffer.allocUnsafe(Math.max(2 * key.length, length + 3 * text.length + 8));
      key.copy(bigger, 0, 0, length);
      key = bigger;
    }
    length += key.write(text, length);
  };
  for (const m of messages) {
    put(String(m.role));
    key[length++] = KEY_END;
    const c = m.content;
    if (typeof c === "string") put(c.trim());
    else if (c == null) key[length++] = KEY_NULL;
    else {
      key[length++] = KEY_JSON;
      put(JSON.stringify(c));
    }
    key[length++] = KEY_END;
    let rest: Record<string, unknown> | undefined;
    for (const k in m) {
      if (k === "role" || k === "content") continue;
      rest ??= {};
      rest[k] = m[k as keyof Message];
    }
    if (rest) put(JSON.stringify(rest));
    key[length++] = KEY_END;
  }
  return { buffer: key, length };
}
