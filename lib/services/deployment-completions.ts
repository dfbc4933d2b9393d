// Completions on a deployment: the public parameters become the worker's generation request,
// the worker's result becomes the public response. Routing and failover are in inference-routing.
import type { DeploymentCompletionInput, DeploymentCompletionResult } from "../contracts/deployments";
import type {
  GenerationMessage,
  GenerationRequestInput,
  GenerationResult,
  GenerationStreamEvent,
  GenerationUsage,
} from "../contracts/generation";
import type { DbOrTx } from "../db/client";
import type { Deployment } from "../db/schema";
import type { CallOptions, InferenceClient } from "../inference/client";
import { captureCompletion, type CaptureRequest, type FinishedChoice } from "./capture";
import { generateUpstream, openUpstream, type UpstreamTarget } from "../inference/backends/upstream";
import { open as openSealed } from "../secret-box";
import { ApiError } from "../errors";
import { beginCompletion, type CompletionMeter, type CompletionOutcome } from "./completion-events";
import { withWorker } from "./inference-routing";
import { batchedEvents, eventBatches, type GenerationEvents } from "../inference/batches";

/** What a completion may carry: the deployment body, the GET query subset, or a chat turn list. */
export type CompletionParams = Omit<Partial<DeploymentCompletionInput>, "prompt" | "stream"> & {
  prompt?: string;
  messages?: GenerationMessage[];
};

export function toGenerationRequest(
  deployment: Pick<Deployment, "model" | "dtype" | "teamId">,
  p: CompletionParams,
): GenerationRequestInput {
  const request: Record<string, unknown> = {
    model: deployment.model,
    dtype: deployment.dtype,
    tenant: deployment.teamId,
    prompt: p.prompt,
    messages: p.messages,
    max_tokens: p.max_tokens,
    temperature: p.temperature,
    top_p: p.top_p,
    top_k: p.top_k,
    repetition_penalty: p.repetition_penalty,
    stop: p.stop ?? p.stop_sequences,
    n: p.n,
    echo: p.echo,
    bad_words: p.bad_words,
    logit_bias: p.logit_bias,
    tfs: p.tfs,
    logprobs: p.logprobs,
    seed: p.seed,
  };
  for (const k of Object.keys(request)) if (request[k] === undefined) delete request[k];
  return request as GenerationRequestInput;
}

/**
 * How a completion is made: the client's abort signal and request id, what it counts against
 * (the key's quota, the metrics and usage; see completion-events.ts), and where it is captured
 * (capture.ts: one sample per finished choice, written once the completion has finished).
 */
export type CompletionCall = CallOptions & {
  meter?: CompletionMeter;
  capture?: CaptureRequest;
  /**
   * The stream is collected into one answer (a non-streamed OpenAI completion with logprobs):
   * the client sees no first token, so none is timed, as for `generateOnDeployment`.
   */
  collected?: boolean;
};

type Target = Pick<Deployment, "id" | "name" | "model" | "dtype" | "teamId"> &
  Partial<Pick<Deployment, "upstreamKind" | "upstreamUrls" | "upstreamModel" | "upstreamKey" | "upstreamHostsChecked">>;

/** An upstream deployment's key; one sealed under another AUTH_SECRET says so (was a bare 500). */
function unsealedKey(sealed: string, deploymentId: string): string {
  try {
    return openSealed(sealed, deploymentId);
  } catch {
    throw new ApiError(
      500,
      "internal",
      "This upstream deployment's key cannot be read: it was stored under another AUTH_SECRET than the " +
        "app's (the secret changed, or a CLI ran without it). Delete the deployment and create it again with its key.",
    );
  }
}

/** The upstream servers of an upstream deployment (its key unsealed), or null for a local one. */
function upstreamOf(d: Target): UpstreamTarget | null {
  if (!d.upstreamKind || !d.upstreamUrls?.length) return null;
  return {
    kind: d.upstreamKind,
    urls: d.upstreamUrls,
    model: d.upstreamModel ?? d.model,
    key: d.upstreamKey ? unsealedKey(d.upstreamKey, d.id) : undefined,
    teamId: d.teamId,
    checkHosts: d.upstreamHostsChecked ?? false,
  };
}

export async function generateOnDeployment(
  db: DbOrTx,
  deployment: Target,
  params: CompletionParams,
  call: CompletionCall = {},
): Promise<GenerationResult> {
  const startedAt = performance.now();
  const request = toGenerationRequest(deployment, params);
  const end = beginCompletion(db, deployment, call.meter);
  let worker: InferenceClient | undefined;
  let used: (() => GenerationUsage) | undefined;
  try {
    const upstream = upstreamOf(deployment);
    const result = upstream
      ? await generateUpstream(upstream, request, call, (events) => (used = events.used))
      : await withWorker(db, deployment, (client) => (worker = client).generate(request, call), call.signal);
    end({ status: "ok", promptTokens: result.usage.prompt_tokens, completionTokens: result.usage.completion_tokens });
    if (call.capture)
      captureCompletion(db, call.capture, result.choices, result.usage, {
        latencyMs: performance.now() - startedAt,
        streamed: false,
      });
    return result;
  } catch (err) {
    endThrown(err, call, { worker, used }, end);
    throw err;
  }
}

/**
 * Ends a completion; one its client left, or that failed midway, is charged what it had used by
 * then, so that leaving just before the end does not make a generation free of the key's tokens
 * per minute: the worker's count (it keeps it by request id: GET /usage; asked in the background,
 * nobody waits), or an upstream's (what it reported, else the tokens it streamed).
 */
function endLeft(
  outcome: CompletionOutcome,
  { worker, used }: { worker?: InferenceClient; used?: () => GenerationUsage },
  requestId: string | undefined,
  end: (o: CompletionOutcome) => void,
) {
  const charged = (u: GenerationUsage | null) =>
    end(u ? { ...outcome, promptTokens: u.prompt_tokens, completionTokens: u.completion_tokens } : outcome);
  if (outcome.status === "ok") return end(outcome);
  if (used) return charged(used());
  if (!worker || !requestId) return end(outcome);
  void worker
    .leftUsage(requestId)
    .catch(() => null)
    .then(charged);
}

/**
 * Ends a completion that threw before its answer: cancelled when its client left, else failed,
 * and charged what it used (endLeft); a refusal (a 4xx: bad parameters, context length) used
 * nothing, so nobody is asked.
 */
function endThrown(
  err: unknown,
  call: CompletionCall,
  sources: { worker?: InferenceClient; used?: () => GenerationUsage },
  end: (o: CompletionOutcome) => void,
) {
  const status = call.signal?.aborted ? "cancelled" : "error";
  const refused = status === "error" && err instanceof ApiError && err.status < 500;
  endLeft({ status, promptTokens: 0, completionTokens: 0 }, refused ? {} : sources, call.requestId, end);
}

/**
 * Starts a streamed generation; resolves once a worker has accepted it, so that invalid
 * parameters, context length and "no worker" are still plain HTTP errors.
 */
export async function openStreamOnDeployment(
  db: DbOrTx,
  deployment: Target,
  params: CompletionParams,
  call: CompletionCall = {},
): Promise<GenerationEvents> {
  const startedAt = performance.now();
  const request = toGenerationRequest(deployment, params);
  const end = beginCompletion(db, deployment, call.meter);
  let events: GenerationEvents;
  let worker: InferenceClient | undefined;
  try {
    const upstream = upstreamOf(deployment);
    events = upstream
      ? await openUpstream(upstream, request, call)
      : await withWorker(db, deployment, (client) => (worker = client).open(request, call), call.signal);
  } catch (err) {
    endThrown(err, call, { worker }, end);
    throw err;
  }
  const capture = call.capture;
  // The first token is the first generated text: with `echo`, what follows the echoed prompt.
  const firstToken = call.collected ? null : { startedAt, after: params.echo ? (params.prompt?.length ?? 0) : 0 };
  return metered(events, firstToken, call.signal, (outcome, choices) => {
    endLeft(outcome, { worker, used: events.used }, call.requestId, end);
    // Only a stream that finished is captured: an abandoned or failed one stores nothing.
    if (capture && outcome.status === "ok")
      captureCompletion(
        db,
        capture,
        choices,
        {
          prompt_tokens: outcome.promptTokens,
          completion_tokens: outcome.completionTokens,
          total_tokens: outcome.promptTokens + outcome.completionTokens,
        },
        { latencyMs: performance.now() - startedAt, ttftMs: outcome.ttftMs, streamed: !call.collected },
      );
  });
}

/** When the first token is timed from, and how many characters of each choice come before it. */
type FirstToken = { startedAt: number; after: number } | null;

/**
 * The events as they come (in the groups they came in); when the stream ends (done, failed or
 * abandoned), `end` learns how, with each choice's text and finish as far as they came, and the
 * time to the first token (null `firstToken`: not timed).
 */
export function metered(
  events: AsyncIterable<GenerationStreamEvent>,
  firstToken: FirstToken,
  signal: AbortSignal | undefined,
  end: (outcome: CompletionOutcome, choices: FinishedChoice[]) => void,
): GenerationEvents {
  return batchedEvents(meteredGroups(events, firstToken, signal, end));
}

async function* meteredGroups(
  events: AsyncIterable<GenerationStreamEvent>,
  firstToken: FirstToken,
  signal: AbortSignal | undefined,
  end: (outcome: CompletionOutcome, choices: FinishedChoice[]) => void,
): AsyncIterable<GenerationStreamEvent[]> {
  const outcome: CompletionOutcome = { status: "cancelled", promptTokens: 0, completionTokens: 0 };
  const choices = new Map<number, FinishedChoice>();
  const choice = (index: number) => {
    let c = choices.get(index);
    if (!c) choices.set(index, (c = { index, text: "", finish_reason: "cancelled", stop: null }));
    return c;
  };
  try {
    for await (const group of eventBatches(events)) {
      for (const e of group) {
        if (e.type === "delta") {
          const c = choice(e.index);
          c.text += e.text;
          if (firstToken && outcome.ttftMs === undefined && c.text.length > firstToken.after)
            outcome.ttftMs = performance.now() - firstToken.startedAt;
        } else if (e.type === "finish") {
          const c = choice(e.index);
          c.finish_reason = e.finish_reason;
          c.stop = e.stop;
        } else if (e.type === "done") {
          outcome.status = "ok";
          outcome.promptTokens = e.usage.prompt_tokens;
          outcome.completionTokens = e.usage.completion_tokens;
        }
      }
      yield group;
    }
  } catch (err) {
    // The client left (the read saw the abort before the consumer stopped), or the key was
    // revoked: cancelled, as when the consumer stops first, so that what it used is charged.
    outcome.status = (err as Error)?.name === "AbortError" || signal?.aborted ? "cancelled" : "error";
    throw err;
  } finally {
    end(
      outcome,
      [...choices.values()].sort((a, b) => a.index - b.index),
    );
  }
}

/** The deployment completion response (`result[]`, with the extras documented in docs/api.md). */
export function toCompletionResult(r: GenerationResult, withLogprobs: boolean): DeploymentCompletionResult {
  return {
    result: r.choices.map((c) => ({
      index: c.index,
      completion: c.text,
      finish_reason: c.finish_reason === "stop" ? "stop" : "length",
      stop: c.stop,
      ...(withLogprobs ? { logprobs: c.logprobs ?? [] } : {}),
    })),
    usage: r.usage,
  };
}
