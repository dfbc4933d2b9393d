// The worker's generation events as the deployment endpoints' server-sent events.
// An error after the stream has started cannot change the status any more: it is sent as an
// event that says so (never a silent end), see docs/api.md "Deployments".
import type { DeploymentStreamChunk } from "../contracts/deployments";
import type { FinishReason, GenerationStreamEvent, GenerationUsage } from "../contracts/generation";
import { ApiError, type ErrorBody } from "../errors";
import { InferenceError } from "../inference/client";
import { toApiError } from "../services/inference-routing";
import { sseFrame } from "./sse";
import { logger } from "../observe/log";

/** The client went away: the request to the worker was aborted on purpose, nothing to report. */
export const clientGone = (e: unknown) => e instanceof Error && e.name === "AbortError";

/** A mid-stream failure as the error body's `error` object. */
export function midStreamError(e: unknown, requestId: string): ErrorBody["error"] {
  if (e instanceof ApiError) return e.toBody().error;
  if (e instanceof InferenceError) return toApiError(e).toBody().error;
  logger().error({ reqId: requestId, err: e }, "stream failed");
  return { type: "internal", message: `The generation stopped unexpectedly (request id ${requestId}).` };
}

/** POST with `stream: true`: data-only events, then `data: [DONE]` (or an error event, then the end). */
export async function* completionStreamFrames(
  events: AsyncIterable<GenerationStreamEvent>,
  requestId: string,
): AsyncIterable<string> {
  const frame = (chunk: DeploymentStreamChunk) => sseFrame(chunk);
  try {
    for await (const e of events) {
      if (e.type === "delta") {
        if (e.text || e.logprobs?.length)
          yield frame({ index: e.index, completion: e.text, ...(e.logprobs ? { logprobs: e.logprobs } : {}) });
      } else if (e.type === "finish") {
        yield frame({ index: e.index, completion: "", finish_reason: publicReason(e.finish_reason), stop: e.stop });
      } else if (e.type === "done") {
        yield frame({ usage: e.usage });
      }
    }
  } catch (e) {
    if (clientGone(e)) return;
    yield frame({ error: midStreamError(e, requestId) });
    return;
  }
  yield sseFrame("[DONE]");
}

/** GET: `event: update` with `{completion}` per new text, then `event: end`. */
export async function* updateStreamFrames(
  events: AsyncIterable<GenerationStreamEvent>,
  requestId: string,
): AsyncIterable<string> {
  let finish: { finish_reason: "stop" | "length"; stop: string | null } = { finish_reason: "length", stop: null };
  let usage: GenerationUsage | null = null;
  try {
    for await (const e of events) {
      if (e.type === "delta" && e.text) yield sseFrame({ completion: e.text }, "update");
      else if (e.type === "finish") finish = { finish_reason: publicReason(e.finish_reason), stop: e.stop };
      else if (e.type === "done") usage = e.usage;
    }
  } catch (e) {
    if (clientGone(e)) return;
    yield sseFrame({ error: midStreamError(e, requestId) }, "error");
    yield sseFrame({ finish_reason: "error", stop: null, usage: null }, "end");
    return;
  }
  yield sseFrame({ ...finish, usage }, "end");
}

/** "cancelled" only happens once the client has gone, so it is never sent. */
export const publicReason = (r: FinishReason): "stop" | "length" => (r === "stop" ? "stop" : "length");
