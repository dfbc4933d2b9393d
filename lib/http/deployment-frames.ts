// The worker's generation events as the deployment endpoints' server-sent events.
// An error after the stream has started cannot change the status any more: it is sent as an
// event that says so (never a silent end), see docs/api.md "Deployments".
import type { DeploymentStreamChunk } from "../contracts/deployments";
import type { FinishReason, GenerationStreamEvent } from "../contracts/generation";
import { ApiError, type ErrorBody } from "../errors";
import { InferenceError } from "../inference/client";
import { toApiError } from "../services/inference-routing";
import { eventBatches } from "../inference/batches";
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

const frame = (chunk: DeploymentStreamChunk) => sseFrame(chunk);
const DONE_FRAME = sseFrame("[DONE]");

/**
 * POST with `stream: true`: data-only events, then `data: [DONE]` (or an error event, then the
 * end). The frames of the events that came together (one network read) are one string, one write.
 */
export async function* completionStreamFrames(
  events: AsyncIterable<GenerationStreamEvent>,
  requestId: string,
): AsyncIterable<string> {
  let done = false;
  try {
    for await (const group of eventBatches(events)) {
      let out = "";
      for (const e of group) {
        if (e.type === "delta") {
          if (e.text || e.logprobs?.length)
            out += frame({ index: e.index, completion: e.text, ...(e.logprobs ? { logprobs: e.logprobs } : {}) });
        } else if (e.type === "finish") {
          out += frame({ index: e.index, completion: "", finish_reason: publicReason(e.finish_reason), stop: e.stop });
        } else if (e.type === "done") {
          // The last event of a generation: the end goes out with it.
          out += frame({ usage: e.usage }) + DONE_FRAME;
          done = true;
        }
      }
      if (out) yield out;
    }
  } catch (e) {
    if (clientGone(e) || done) return;
    yield frame({ error: midStreamError(e, requestId) });
    return;
  }
  if (!done) yield DONE_FRAME;
}

/** GET: `event: update` with `{completion}` per new text, then `event: end`. */
export async function* updateStreamFrames(
  events: AsyncIterable<GenerationStreamEvent>,
  requestId: string,
): AsyncIterable<string> {
  let finish: { finish_reason: "stop" | "length"; stop: string | null } = { finish_reason: "length", stop: null };
  let ended = false;
  try {
    for await (const group of eventBatches(events)) {
      let out = "";
      for (const e of group) {
        if (e.type === "delta" && e.text) out += sseFrame({ completion: e.text }, "update");
        else if (e.type === "finish") finish = { finish_reason: publicReason(e.finish_reason), stop: e.stop };
        else if (e.type === "done") {
          // The last event of a generation: the end goes out with the group that carried it.
          out += sseFrame({ ...finish, usage: e.usage }, "end");
          ended = true;
        }
      }
      if (out) yield out;
    }
  } catch (e) {
    if (clientGone(e) || ended) return;
    yield (
      sseFrame({ error: midStreamError(e, requestId) }, "error") +
      sseFrame({ finish_reason: "error", stop: null, usage: null }, "end")
    );
    return;
  }
  if (!ended) yield sseFrame({ ...finish, usage: null }, "end");
}

/** "cancelled" only happens once the client has gone, so it is never sent. */
export const publicReason = (r: FinishReason): "stop" | "length" => (r === "stop" ? "stop" : "length");
