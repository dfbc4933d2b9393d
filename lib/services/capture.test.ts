import { spawnSync } from "node:child_process";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { ApiError, notFound } from "../errors";
import { logger } from "../observe/log";
import { appMetrics } from "../observe/metrics";
import { storableText } from "../contracts/text";
import { captureFromHeaders, capturedSamples, requestedCapture, storeWithRetry } from "./capture";
import type { SampleToStore } from "./samples";

const row = (pipelineId = "pipe_a"): SampleToStore => ({
  id: `sample_${Math.random().toString(36).slice(2)}`,
  teamId: "team_a",
  pipelineId,
  sample: { messages: [{ role: "user", content: "hi" }], userId: undefined, groupId: undefined, metadata: undefined },
});
const ok = (id: string): PromiseSettledResult<string> => ({ status: "fulfilled", value: id });
const failed = (reason: unknown): PromiseSettledResult<string> => ({ status: "rejected", reason });
const failures = async (reason: string) =>
  (await appMetrics().captureFailures.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;

describe("storeWithRetry", () => {
  it("retries what failed for a passing reason until it is stored, and counts no failure", async () => {
    const before = await failures("error");
    const write = vi
      .fn<(rows: SampleToStore[]) => Promise<PromiseSettledResult<string>[]>>()
      .mockResolvedValueOnce([ok("s1"), failed(new Error("connection reset"))])
      .mockRejectedValueOnce(new Error("pool ended"))
      .mockResolvedValueOnce([ok("s2")]);
    const stored = await storeWithRetry([row(), row()], write, { requestId: "r1", delaysMs: [1, 1, 1] });
    expect(stored).toBe(2);
    expect(write).toHaveBeenCalledTimes(3);
    // Only the row that failed goes again.
    expect(write.mock.calls[1]![0]).toHaveLength(1);
    expect(await failures("error")).toBe(before);
  });

  it("gives up after its retries: logged and counted, never silently", async () => {
    const before = await failures("error");
    const log = vi.spyOn(logger(), "error").mockImplementation(() => undefined);
    const write = vi.fn(async (rows: SampleToStore[]) => rows.map(() => failed(new Error("disk full"))));
    const stored = await storeWithRetry([row()], write, { requestId: "r2", delaysMs: [1, 1] });
    expect(stored).toBe(0);
    expect(write).toHaveBeenCalledTimes(3);
    expect(await failures("error")).toBe(before + 1);
    expect(log).toHaveBeenCalledWith(
      expect.objectContaining({ reqId: "r2", pipelineId: "pipe_a", reason: "error" }),
      "captured sample not stored",
    );
    // Never the content in the log.
    expect(JSON.stringify(log.mock.calls)).not.toContain("hi");
    log.mockRestore();
  });

  it("counts a retried row found already stored (its first write had committed) as stored, once", async () => {
    const before = await failures("error");
    const duplicate = Object.assign(new Error("duplicate key"), { code: "23505", constraint_name: "samples_pkey" });
    const write = vi
      .fn<(rows: SampleToStore[]) => Promise<PromiseSettledResult<string>[]>>()
      .mockRejectedValueOnce(new Error("connection lost after commit"))
      .mockResolvedValueOnce([failed(duplicate)]);
    expect(await storeWithRetry([row()], write, { requestId: "r4", delaysMs: [1, 1] })).toBe(1);
    expect(write).toHaveBeenCalledTimes(2);
    // The same id both times: the database, not this process, says whether it was stored.
    expect(write.mock.calls[1]![0]![0]!.id).toBe(write.mock.calls[0]![0]![0]!.id);
    expect(await failures("error")).toBe(before);
  });

  it("does not retry a row whose pipeline has gone", async () => {
    const before = await failures("pipeline_gone");
    const log = vi.spyOn(logger(), "error").mockImplementation(() => undefined);
    const write = vi.fn(async (rows: SampleToStore[]) => rows.map(() => failed(notFound("gone", "id"))));
    expect(await storeWithRetry([row("pipe_gone")], write, { requestId: "r3", delaysMs: [1, 1] })).toBe(0);
    expect(write).toHaveBeenCalledTimes(1);
    expect(await failures("pipeline_gone")).toBe(before + 1);
    log.mockRestore();
  });
});

describe("the header form", () => {
  const headers = (h: Record<string, string>) => new Headers(h);

  it("reads the four headers like the body field", () => {
    expect(
      captureFromHeaders(
        headers({
          "x-pipeline-id": "pipe_1",
          "X-Pipeline-User-Id": "u",
          "X-Pipeline-Group-Id": "g",
          "X-Pipeline-Metadata": '{"a":"b"}',
        }),
      ),
    ).toEqual({ id: "pipe_1", userId: "u", groupId: "g", metadata: { a: "b" } });
    expect(captureFromHeaders(headers({ authorization: "x" }))).toBeUndefined();
  });

  it("names the header at fault", () => {
    const param = (h: Record<string, string>) => {
      try {
        captureFromHeaders(headers(h));
      } catch (e) {
        return (e as ApiError).param;
      }
    };
    expect(param({ "X-Pipeline-Id": "p", "X-Pipeline-Metadata": "nope" })).toBe("X-Pipeline-Metadata");
    expect(param({ "X-Pipeline-Id": "p", "X-Pipeline-Metadata": "null" })).toBe("X-Pipeline-Metadata");
    expect(param({ "X-Pipeline-Id": "p", "X-Pipeline-Metadata": '{"a":1}' })).toBe("X-Pipeline-Metadata");
    expect(param({ "X-Pipeline-Group-Id": "g" })).toBe("X-Pipeline-Id");
    expect(param({ "X-Pipeline-Id": "p", "X-Pipeline-User-Id": "u".repeat(257) })).toBe("X-Pipeline-User-Id");
  });

  it("refuses both forms at once", () => {
    const body = { id: "p", userId: undefined, groupId: undefined, metadata: undefined };
    expect(() => requestedCapture(body, headers({ "X-Pipeline-Id": "p" }))).toThrow(
      expect.objectContaining({ status: 400, param: "pipeline" }),
    );
    expect(requestedCapture(body, headers({}))).toEqual({ capture: body, param: "pipeline.id" });
  });
});

describe("capturedSamples", () => {
  const req = {
    teamId: "t",
    pipelineId: "p",
    metadata: { a: "b" },
    messages: [{ role: "user" as const, content: "Hello" }],
    echoedPrefix: "Hello",
    facts: { endpoint: "deployment" as const, deployment: "t/d", deploymentId: "dep", model: "m", requestId: "r" },
  };
  const usage = { prompt_tokens: 2, completion_tokens: 5, total_tokens: 7 };

  it("one sample per finished choice, the echoed prompt left out, unstorable text replaced", () => {
    const rows = capturedSamples(
      req,
      [
        { index: 0, text: "Hello world", finish_reason: "stop", stop: "!" },
        { index: 1, text: "Hello\u0000 \ud800x", finish_reason: "length", stop: null },
        { index: 2, text: "Hello never", finish_reason: "cancelled", stop: null },
      ],
      usage,
      { latencyMs: 12.345, streamed: false },
    );
    expect(rows).toHaveLength(2);
    expect(rows[0]!.sample.messages).toEqual([
      { role: "user", content: "Hello" },
      { role: "assistant", content: " world" },
    ]);
    expect(rows[1]!.sample.messages[1]).toEqual({ role: "assistant", content: "\uFFFD \uFFFDx" });
    expect(rows[0]!.generation).toMatchObject({ index: 0, n: 3, finishReason: "stop", stop: "!", latencyMs: 12.3 });
    expect(rows[1]!.generation).toMatchObject({ index: 1, finishReason: "length", completionTokens: 5 });
    expect(storableText("a\ud83d\ude00b")).toBe("a\ud83d\ude00b"); // a whole pair is kept
  });

  it("replaces what jsonb refuses in the stop string too (a stop of half an emoji matches inside one)", () => {
    const [row] = capturedSamples(
      req,
      [{ index: 0, text: "Hello \ud83d", finish_reason: "stop", stop: "\ud83d" }],
      usage,
      { latencyMs: 1, streamed: true },
    );
    expect(row!.generation!.stop).toBe("\uFFFD");
  });
});

describe("a stop with a capture's write under way", () => {
  it("says on the log how many samples were not stored", () => {
    const script = path.join(import.meta.dirname, "testing/capture-exit.ts");
    const child = spawnSync(process.execPath, ["--import", "tsx", script], {
      encoding: "utf8",
      env: { ...process.env, LOG_FORMAT: "json", LOG_LEVEL: "info" },
      timeout: 30_000,
    });
    expect(child.status, child.stderr).toBe(0);
    const lines = (child.stdout + child.stderr)
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.find((l) => String(l.msg).startsWith("captured samples not stored"))).toMatchObject({
      samples: 2,
      completions: 1,
    });
  });
});
