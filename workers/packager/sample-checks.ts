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
 * The conversations seen so far, as 128-bit digests (MD5) of their keys (conversationKey: each
 * content trimmed, role, tool calls and the other fields as they are), in an open-addressing
 * table of 32-bit words: 32 bytes per conversation at most (1M conversations: 32 MB), instead of a
 * Set of strings (~100 MB).
 */
export class SeenConversations {
  private slots = new Uint32Array(4 * 1024);
  private count = 0;

  /** True the first time a conversation is added (the one to keep), false for its repeats. */
  add(messages: Message[]): boolean {
    const d = hash("md5", conversationKey(messages), "buffer");
    const words = [d.readUInt32LE(0), d.readUInt32LE(4), d.readUInt32LE(8), (d.readUInt32LE(12) | 1) >>> 0];
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
