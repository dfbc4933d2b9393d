import { hash } from "node:crypto";
import type { InvalidReason } from "@/lib/contracts/dataset-options";
import type { ToolCall } from "@/lib/contracts/messages";

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
 * Which file a sample goes to: validation when the first 6 bytes of SHA-256(`<seed>:<id>`), as
 * a big-endian integer divided by 2^48, are below `validation`. It depends on nothing but the
 * id and the seed, so a sample keeps its side when the selection grows.
 */
export function inValidation(id: string, split: { validation: number; seed: number }): boolean {
  const digest = hash("sha256", `${split.seed}:${id}`, "buffer");
  return digest.readUIntBE(0, 6) / 2 ** 48 < split.validation;
}

/**
 * The conversations seen so far, as 128-bit digests (keyDigest) of their keys (conversationKey:
 * each content trimmed, role, tool calls and the other fields as they are), in an open-addressing
 * table of 32-bit words: 32 bytes per conversation at most (1M conversations: 32 MB), instead of a
 * Set of strings (~100 MB).
 */
export class SeenConversations {
  private slots = new Uint32Array(4 * 1024);
  private count = 0;

  /** True the first time a conversation is added (the one to keep), false for its repeats. */
  add(messages: Message[]): boolean {
    const words = keyDigest(conversationKey(messages));
    words[3] = (words[3]! | 1) >>> 0;
    if (!this.insert(words)) return false;
    if (++this.count * 2 > this.slots.length / 4) this.grow();
    return true;
  }

  /** false when present. The last word is never 0 (`| 1` above), so 0 marks an empty slot. */
  private insert(w: number[]): boolean {
    const capacity = this.slots.length / 4;
    for (let i = w[0]! & (capacity - 1); ; i = (i + 1) & (capacity - 1)) {
      const at = i * 4;
      if (this.slots[at + 3] === 0) {
        this.slots.set(w, at);
        return true;
      }
      if (
        this.slots[at] === w[0] &&
        this.slots[at + 1] === w[1] &&
        this.slots[at + 2] === w[2] &&
        this.slots[at + 3] === w[3]
      )
        return false;
    }
  }

  private grow(): void {
    const old = this.slots;
    this.slots = new Uint32Array(old.length * 2);
    for (let at = 0; at < old.length; at += 4) {
      if (old[at + 3] !== 0) this.insert([old[at]!, old[at + 1]!, old[at + 2]!, old[at + 3]!]);
    }
  }
}

/**
 * The text a conversation is known by: per message its role and its content trimmed, each
 * length-prefixed (so no two conversations share a key), then any other field (tool calls, ids,
 * names) as JSON. Built without copying the messages: dedupe runs on every sample of a dataset.
 */
export function conversationKey(messages: Message[]): string {
  let key = "";
  for (const m of messages) {
    const role = String(m.role);
    const c = m.content;
    const content = typeof c === "string" ? c.trim() : c == null ? null : JSON.stringify(c);
    key += `${role.length}:${role}`;
    key += content === null ? "-" : `${typeof c === "string" ? "s" : "j"}${content.length}:${content}`;
    let rest: Record<string, unknown> | undefined;
    for (const k in m) {
      if (k === "role" || k === "content") continue;
      rest ??= {};
      rest[k] = m[k as keyof Message];
    }
    if (rest) {
      const extra = JSON.stringify(rest);
      key += `+${extra.length}:${extra}`;
    }
    key += ";";
  }
  return key;
}

/**
 * A 128-bit digest of a string, as four unsigned 32-bit words: MurmurHash3's x86 128-bit rounds
 * and finalizer over the string's UTF-16 code units (copied with one native write into a scratch
 * buffer, then read a 32-bit word at a time), the length mixed in. Not cryptographic, but 128 bits
 * keep accidental collisions negligible (1 in 2^128 per pair), and it costs about a sixth of a
 * call into node:crypto for MD5 (0.2 µs against 1.2–1.4 µs for a chat sample's key): dedupe runs on
 * every sample. Deterministic within a process: equal strings, equal digests.
 */
export function keyDigest(s: string): number[] {
  if (s.length * 2 + 16 > scratchBytes.length) {
    scratchWords = new Uint32Array((s.length >>> 1) + 1024);
    scratchBytes = Buffer.from(scratchWords.buffer);
  }
  const bytes = scratchBytes.write(s, 0, "utf16le");
  scratchBytes.fill(0, bytes, bytes + 16); // the last round reads zeros past the end
  const w = scratchWords;
  const words = (bytes + 3) >>> 2;
  let h1 = SEED;
  let h2 = SEED;
  let h3 = SEED;
  let h4 = SEED;
  let i = 0;
  for (; i + 4 <= words; i += 4) {
    h1 ^= Math.imul(rotl(Math.imul(w[i]!, C1), 15), C2);
    h1 = (Math.imul(rotl(h1, 19) + h2, 5) + 0x561ccd1b) | 0;
    h2 ^= Math.imul(rotl(Math.imul(w[i + 1]!, C2), 16), C3);
    h2 = (Math.imul(rotl(h2, 17) + h3, 5) + 0x0bcaa747) | 0;
    h3 ^= Math.imul(rotl(Math.imul(w[i + 2]!, C3), 17), C4);
    h3 = (Math.imul(rotl(h3, 15) + h4, 5) + 0x96cd1c35) | 0;
    h4 ^= Math.imul(rotl(Math.imul(w[i + 3]!, C4), 18), C1);
    h4 = (Math.imul(rotl(h4, 13) + h1, 5) + 0x32ac3b17) | 0;
  }
  if (i < words) {
    h4 ^= Math.imul(rotl(Math.imul(w[i + 3]!, C4), 18), C1);
    h3 ^= Math.imul(rotl(Math.imul(w[i + 2]!, C3), 17), C4);
    h2 ^= Math.imul(rotl(Math.imul(w[i + 1]!, C2), 16), C3);
    h1 ^= Math.imul(rotl(Math.imul(w[i]!, C1), 15), C2);
  }
  const n = s.length; // tells "a" from "a\0" (same words once zero-padded)
  h1 ^= n;
  h2 ^= n;
  h3 ^= n;
  h4 ^= n;
  h1 = (h1 + h2 + h3 + h4) | 0;
  h2 = (h2 + h1) | 0;
  h3 = (h3 + h1) | 0;
  h4 = (h4 + h1) | 0;
  h1 = fmix(h1);
  h2 = fmix(h2);
  h3 = fmix(h3);
  h4 = fmix(h4);
  h1 = (h1 + h2 + h3 + h4) | 0;
  h2 = (h2 + h1) | 0;
  h3 = (h3 + h1) | 0;
  h4 = (h4 + h1) | 0;
  return [h1 >>> 0, h2 >>> 0, h3 >>> 0, h4 >>> 0];
}

let scratchWords = new Uint32Array(16 * 1024);
let scratchBytes = Buffer.from(scratchWords.buffer);
const SEED = 0x9747b28c | 0;
const C1 = 0x239b961b;
const C2 = 0xab0e9789 | 0;
const C3 = 0x38b34ae5;
const C4 = 0xa1e38b93 | 0;
const rotl = (x: number, r: number) => (x << r) | (x >>> (32 - r));
function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b | 0);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35 | 0);
  return h ^ (h >>> 16);
}
