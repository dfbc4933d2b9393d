// Completions on a deployment: the public parameters become the worker's generation request,
// the worker's result becomes the public response. Routing and failover are in inference-routing.
import type { DeploymentCompletionInput, DeploymentCompletionResult } from "../contracts/deployments";
import type {
  GenerationMessage,
  GenerationRequestInput,
  GenerationResult,
  GenerationStreamEvent,
} from "../contracts/generation";
import type { DbOrTx } from "../db/client";
import type { Deployment } from "../db/schema";
import { withWorker } from "./inference-routing";

/** What a completion may carry: the deployment body, the GET query subset, or a chat turn list. */
export type CompletionParams = Omit<Partial<DeploymentCompletionInput>, "prompt" | "stream"> & {
  prompt?: string;
  messages?: GenerationMessage[];
};

export function toGenerationRequest(model: string, p: CompletionParams): GenerationRequestInput {
  const request: Record<string, unknown> = {
    model,
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

export async function generateOnDeployment(
  db: DbOrTx,
  deployment: Pick<Deployment, "model">,
  params: CompletionParams,
  signal?: AbortSignal,
): Promise<GenerationResult> {
  const request = toGenerationRequest(deployment.model, params);
  return withWorker(db, deployment.model, (client) => client.generate(request, { signal }), signal);
}

/**
 * Starts a streamed generation; resolves once a worker has accepted it, so that invalid
 * parameters, context length and "no worker" are still plain HTTP errors.
 */
export async function openStreamOnDeployment(
  db: DbOrTx,
  deployment: Pick<Deployment, "model">,
  params: CompletionParams,
  signal?: AbortSignal,
): Promise<AsyncIterable<GenerationStreamEvent>> {
  const request = toGenerationRequest(deployment.model, params);
  return withWorker(db, deployment.model, (client) => client.open(request, { signal }), signal);
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
