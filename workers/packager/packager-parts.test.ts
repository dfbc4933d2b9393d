import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { LocalBlobStore } from "@/lib/blob";
import { DatasetOutput } from "./dataset-output";
import { prefixUpperBound } from "@/lib/services/selection-query";
import { openAiChatRefusal, SeenConversations, type Message } from "./sample-checks";
import { niceBinWidth, TokenTally } from "./token-stats";

const m = (role: string, content: string) => ({ role, content });

describe("openai-chat validation", () => {
  it("names the first rule a conversation breaks, in the documented order", () => {
    expect(openAiChatRefusal([m("user", "q"), m("assistant", "a")])).toBeUndefined();
    expect(openAiChatRefusal([m("system", "s"), m("user", "q"), m("assistant", "a")])).toBeUndefined();
    expect(openAiChatRefusal([m("function", ""), m("system", "s")])).toBe("unknown_role");
    // Tool messages are known; an assistant message with tool calls may have no content.
    const call = { id: "c", type: "function" as const, function: { name: "f", arguments: "{}" } };
    const tools = [
      m("user", "q"),
      { role: "assistant", content: null, tool_calls: [call] },
      { ...m("tool", "r"), tool_call_id: "c" },
    ];
    expect(openAiChatRefusal(tools)).toBeUndefined();
    expect(openAiChatRefusal([m("user", "q"), { role: "assistant", content: null }])).toBe("empty_content");
    expect(openAiChatRefusal([m("user", "q"), m("assistant", "a"), m("tool", "")])).toBe("empty_content");
    expect(openAiChatRefusal([m("user", ""), m("system", "s")])).toBe("empty_content");
    expect(openAiChatRefusal([m("user", " "), m("system", "s"), m("assistant", "a")])).toBe("system_not_first");
    expect(openAiChatRefusal([m("user", "q")])).toBe("no_assistant_message");
  });
});

describe("SeenConversations", () => {
  it("tells conversations apart by their tool calls, not only by role and content", async () => {
    const seen = new SeenConversations();
    const call = (args: string) => ({ id: "c", type: "function" as const, function: { name: "f", arguments: args } });
    expect(seen.add([{ role: "assistant", content: null, tool_calls: [call("{}")] }])).toBe(true);
    expect(seen.add([{ role: "assistant", content: null, tool_calls: [call('{"a":1}')] }])).toBe(true);
    expect(seen.add([{ role: "assistant", content: null, tool_calls: [call("{}")] }])).toBe(false);
  });

  it.each([0, 20_000, 50_000])(
    "keeps the first of each conversation (contents trimmed), sized for %i, through growths",
    async (expected) => {
      const seen = new SeenConversations(expected);
      for (let i = 0; i < 30_000; i++) expect(seen.add([m("user", `q${i}`)])).toBe(true);
      for (let i = 0; i < 30_000; i += 7) expect(seen.add([m("user", `  q${i}\n`)])).toBe(false);
      expect(seen.add([m("assistant", "q1")])).toBe(true); // the role counts
      expect(seen.add([m("user", "q1"), m("user", "")])).toBe(true); // so does every message
      expect(seen.add([m("user", " q1"), m("user", "\t")])).toBe(false);
    },
  );

  it("never mistakes one conversation for another whose fields run together", async () => {
    const seen = new SeenConversations();
    const conversations: Message[][] = [
      [m("user", "ab"), m("user", "c")],
      [m("user", "a"), m("user", "bc")],
      [m("user", "abc")],
      [m("user1", "x")],
      [m("user", "1x")],
      [{ role: "user", content: null }],
      [{ role: "user", content: "" }],
      [{ role: "user", content: "null" }],
      [{ role: "user", content: "-" }],
      [{ role: "user", content: "x", name: "a" }],
      [{ role: "user", content: "x", name: "b" }],
      [{ role: "user", content: 'x+9:{"name":"a"}' }],
      [{ role: "user", content: "x;1:u" }],
      [m("user", "x"), m("u", "")],
    ];
    for (const c of conversations) expect(seen.add(c), JSON.stringify(c)).toBe(true);
    for (const c of conversations) expect(seen.add(structuredClone(c)), JSON.stringify(c)).toBe(false);
    // A missing content is a null one, as before.
    expect(seen.add([{ role: "user" }])).toBe(false);
  });
});

describe("token stats", () => {
  it("exact nearest-rank percentiles and a histogram of at most 30 round bins", () => {
    const tally = new TokenTally();
    const counts = Array.from({ length: 3000 }, (_, i) => (i * 37) % 1001);
    for (const c of counts) tally.add(c);
    const sorted = [...counts].sort((a, b) => a - b);
    const s = tally.stats();
    expect(s).toMatchObject({ total: counts.reduce((a, b) => a + b), max: 1000, p50: sorted[1499], p95: sorted[2849] });
    expect(s.histogram.binWidth).toBe(50);
    expect(s.histogram.counts).toHaveLength(21);
    expect(s.histogram.counts.reduce((a, b) => a + b)).toBe(3000);
    expect([0, 29, 30, 59, 149, 150].map(niceBinWidth)).toEqual([1, 1, 2, 2, 5, 10]);
    expect(new TokenTally().stats()).toEqual({
      total: 0,
      p50: 0,
      p95: 0,
      max: 0,
      histogram: { binWidth: 1, counts: [] },
    });
  });
});

describe("DatasetOutput", () => {
  it("writes every line once, in order, whatever their lengths (longer than a batch too)", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "lmp-output-"));
    try {
      const blobs = new LocalBlobStore(dir);
      const out = new DatasetOutput(
        blobs,
        { key: "d/f.jsonl", name: "f.jsonl", split: null },
        { format: "jsonl", compression: "none", dedupe: false },
        new AbortController().signal,
        dir,
      );
      const lines = Array.from({ length: 3000 }, (_, i) => `{"i":${i},"pad":"${"x".repeat((i * 997) % 900)}"}`);
      lines.splice(1500, 0, `{"big":"${"y".repeat(600 * 1024)}"}`);
      for (const line of lines) {
        // Each line sits between other bytes in the buffer it comes from, as in a COPY chunk.
        const data = Buffer.from(`id\t${line}\tside`);
        const wrote = out.add(data, 3, 3 + Buffer.byteLength(line));
        if (wrote) await wrote;
      }
      const file = await out.finish();
      const text = readFileSync(path.join(dir, "d", "f.jsonl"), "utf8");
      expect(text).toBe(lines.join("\n") + "\n");
      expect(file.samples).toBe(lines.length);
      expect(file.bytes).toBe(Buffer.byteLength(text));
      expect(file.checksum).toBe(`sha256:${createHash("sha256").update(text).digest("hex")}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("prefix ranges", () => {
  it("bound every string that starts with the prefix, in code-point order", () => {
    expect(prefixUpperBound("ab")).toBe("ac");
    expect(prefixUpperBound("a\u{10ffff}")).toBe("b");
    expect(prefixUpperBound("\ud7ff")).toBe("\ue000");
    expect(prefixUpperBound("\u{10ffff}")).toBeUndefined();
  });
});
