// Hosted chat and prompt completion (POST /v1/chat/completions) on a team's deployment.
import type { ChatCompletionInput, ChatCompletionResult } from "../contracts/chat-completions";
import type { GenerationChoice, GenerationUsage } from "../contracts/generation";
import type { DbOrTx } from "../db/client";
import type { Deployment, Team } from "../db/schema";
import { notFound } from "../errors";
import { randomToken } from "../ids";
import type { CompletionParams } from "./deployment-completions";
import { findDeploymentByPath } from "./deployments";
import { chatLogprobs, engineLogprobs, type AlignedToken } from "./openai-completions";

/**
 * `model` is `team-slug/deployment-name` or a bare name of the caller's team. Another team's
 * deployment is "not found" like an unknown one: a team cannot learn what others deploy.
 */
export async function resolveChatModel(
  db: DbOrTx,
  team: Team,
  model: string,
): Promise<{ deployment: Deployment; name: string }> {
  const slash = model.indexOf("/");
  const slug = slash >= 0 ? model.slice(0, slash) : team.slug;
  const name = slash >= 0 ? model.slice(slash + 1) : model;
  if (slug !== team.slug) throw notFound(`No deployment '${model}'.`, "model");
  // On the path to every first token: the deployment endpoints' lookup, cached per process and
  // told of every change, rather than a query built and run on each chat turn.
  const deployment = await findDeploymentByPath(db, { teamSlug: slug, name });
  if (!deployment || deployment.teamId !== team.id) throw notFound(`No deployment '${model}'.`, "model");
  return { deployment, name: `${slug}/${name}` };
}

export function toCompletionParams(b: ChatCompletionInput): CompletionParams {
  return {
    messages: b.messages,
    prompt: b.prompt,
    max_tokens: b.max_tokens,
    temperature: b.temperature ?? b.temeperature,
    top_p: b.top_p,
    n: b.n,
    seed: b.seed,
    stop: b.stop,
    logprobs: engineLogprobs(chatTopLogprobs(b)),
  };
}

/** With `logprobs: true`, how many alternatives each token lists (`top_logprobs`, default 0). */
export const chatTopLogprobs = (b: ChatCompletionInput) => (b.logprobs ? (b.top_logprobs ?? 0) : undefined);

export const chatUsage = (u: GenerationUsage) => ({
  input_tokens: u.prompt_tokens,
  output_tokens: u.completion_tokens,
  total_tokens: u.total_tokens,
  prompt_tokens: u.prompt_tokens,
  completion_tokens: u.completion_tokens,
});

/** Identity of one completion: the same in the response or in every chunk of its stream. */
export function chatCompletionMeta(model: string) {
  return { id: `chatcmpl-${randomToken(24)}`, created: Math.floor(Date.now() / 1000), model };
}

/** The response; with `topLogprobs` (logprobs asked for), each choice's tokens become its logprobs. */
export function toChatCompletion(
  r: {
    choices: (Pick<GenerationChoice, "index" | "text" | "finish_reason"> & { tokens?: AlignedToken[] })[];
    usage: GenerationUsage;
  },
  meta: ReturnType<typeof chatCompletionMeta>,
  topLogprobs?: number,
): ChatCompletionResult {
  return {
    ...meta,
    object: "chat.completion",
    choices: r.choices.map((c) => ({
      index: c.index,
      message: { role: "assistant", content: c.text },
      finish_reason: c.finish_reason === "stop" ? "stop" : "length",
      logprobs: topLogprobs === undefined ? null : chatLogprobs(c.tokens ?? [], topLogprobs),
    })),
    usage: chatUsage(r.usage),
    message: { content: r.choices[0]?.text ?? "" },
  };
}
