// The OpenAI-style completion surface (POST /v1/completions, chat logprobs) over the deployment
// completion path: the same resolution of `model`, the same generation (and so the same quota,
// metrics and usage), OpenAI's shapes on top. Whatever serves the deployment (the worker's engine
// today) only has to produce the generation events of lib/contracts/generation.
import { abortedError } from "../errors";
import type { ChatLogprobs, CompletionsInput, CompletionsResult, TextLogprobs } from "../contracts/openai";
import type { GeneratedTokenLogprobs, GenerationStreamEvent, GenerationUsage } from "../contracts/generation";
import type { DbOrTx } from "../db/client";
import { InferenceError } from "../inference/client";
import { randomToken } from "../ids";
import { openStreamOnDeployment, type CompletionCall, type CompletionParams } from "./deployment-completions";
import { toApiError } from "./inference-routing";

/** The text of `prompt` (one string, or an array of one: the contract refuses more). */
export const promptText = (prompt: CompletionsInput["prompt"]): string =>
  typeof prompt === "string" ? prompt : prompt[0]!;

/** How many top logprobs the engine computes for `k` asked (it always scores the chosen token). */
export const engineLogprobs = (k: number | undefined) => (k === undefined ? undefined : Math.max(1, k));

export function toTextCompletionParams(b: CompletionsInput): CompletionParams {
  return {
    prompt: promptText(b.prompt),
    max_tokens: b.max_tokens,
    temperature: b.temperature,
    top_p: b.top_p,
    top_k: b.top_k,
    repetition_penalty: b.repetition_penalty,
    n: b.n,
    stop: b.stop,
    seed: b.seed,
    echo: b.echo,
    bad_words: b.bad_words,
    logit_bias: b.logit_bias,
    tfs: b.tfs,
    logprobs: engineLogprobs(b.logprobs),
  };
}

/** Identity of one text completion: the same in the response or in every chunk of its stream. */
export function textCompletionMeta(model: string) {
  return { id: `cmpl-${randomToken(24)}`, created: Math.floor(Date.now() / 1000), model };
}
export type TextCompletionMeta = ReturnType<typeof textCompletionMeta>;

/** A generated token with the text it added to its choice's text (see `pieces`). */
export type AlignedToken = { text: string; entry: GeneratedTokenLogprobs };

/** What the OpenAI shapes are made of: text with the tokens that produced it, finishes, the usage. */
export type Piece =
  | { type: "text"; index: number; text: string; tokens?: AlignedToken[] }
  | { type: "finish"; index: number; finish_reason: "stop" | "length"; stop: string | null }
  | { type: "done"; usage: GenerationUsage };

/**
 * The generation events as pieces of text. Without logprobs, each delta passes through at once.
 * With them, each token is paired with the text it added, so that the tokens of a choice
 * concatenate to its text: the engine holds text back (an incomplete UTF-8 character, a possible
 * start of a stop string) and releases it with a later token, or at the end, so a piece is held
 * until the next token with text arrives, and text released at the end joins the last token.
 * Tokens whose text a stop string swallowed (it is cut from the completion) are left out.
 */
export async function* pieces(
  events: AsyncIterable<GenerationStreamEvent>,
  withLogprobs: boolean,
): AsyncIterable<Piece> {
  const pending = new Map<number, { text: string; tokens: AlignedToken[] }>();
  const release = function* (index: number): Iterable<Piece> {
    const p = pending.get(index);
    pending.delete(index);
    if (p && (p.text || p.tokens.length)) yield { type: "text", index, text: p.text, tokens: p.tokens };
  };
  for await (const e of events) {
    if (e.type === "delta") {
      if (!withLogprobs || !e.logprobs?.length) {
        const p = withLogprobs ? pending.get(e.index) : undefined;
        if (p && p.tokens.length) {
          p.text += e.text;
          p.tokens.at(-1)!.text += e.text;
        } else if (e.text) yield { type: "text", index: e.index, text: e.text };
        continue;
      }
      const tokens = e.logprobs.map((entry, i) => ({ text: i === 0 ? e.text : "", entry }));
      const p = pending.get(e.index);
      if (p && (p.text === "" || e.text === "")) {
        // Nothing shown yet, or nothing to show now: one piece.
        p.text += e.text;
        p.tokens.push(...tokens);
      } else {
        yield* release(e.index);
        pending.set(e.index, { text: e.text, tokens });
      }
    } else if (e.type === "finish") {
      const p = pending.get(e.index);
      if (p && e.stop !== null) while (p.tokens.length && p.tokens.at(-1)!.text === "") p.tokens.pop();
      yield* release(e.index);
      yield {
        type: "finish",
        index: e.index,
        finish_reason: e.finish_reason === "stop" ? "stop" : "length",
        stop: e.stop,
      };
    } else if (e.type === "done") {
      for (const index of [...pending.keys()]) yield* release(index);
      yield { type: "done", usage: e.usage };
    }
  }
}

/** OpenAI's text logprobs object for `tokens`, the first starting at `offset` of the choice's text. */
export function textLogprobs(tokens: AlignedToken[], offset: number, k: number): TextLogprobs {
  const out: TextLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  for (const t of tokens) {
    out.tokens.push(t.text);
    out.token_logprobs.push(t.entry.logprob);
    // Keyed by token text: no prototype, so "constructor" or "__proto__" is a token like any other.
    const top: Record<string, number> = Object.create(null);
    for (const alt of t.entry.top_logprobs.slice(0, k))
      if (!Object.hasOwn(top, alt.token)) top[alt.token] = alt.logprob;
    // OpenAI always includes the chosen token (so up to k + 1 entries).
    if (!Object.hasOwn(top, t.entry.token)) top[t.entry.token] = t.entry.logprob;
    out.top_logprobs.push(top);
    out.text_offset.push(offset);
    offset += t.text.length;
  }
  return out;
}

const utf8 = (s: string) => [...Buffer.from(s, "utf8")];

/** OpenAI's chat logprobs (`choices[].logprobs`) for `tokens`. */
export function chatLogprobs(tokens: AlignedToken[], k: number): ChatLogprobs {
  return {
    content: tokens.map((t) => ({
      token: t.text,
      logprob: t.entry.logprob,
      bytes: utf8(t.text),
      top_logprobs: t.entry.top_logprobs
        .slice(0, k)
        .map((alt) => ({ token: alt.token, logprob: alt.logprob, bytes: utf8(alt.token) })),
    })),
  };
}

export type CollectedChoice = {
  index: number;
  text: string;
  tokens: AlignedToken[];
  finish_reason: "stop" | "length";
  stop: string | null;
};

/**
 * A whole generation from its stream (used when the client wants one answer with the tokens'
 * logprobs): the same generation, quota and usage as a streamed one, but no time to first token.
 */
export async function collectOnDeployment(
  db: DbOrTx,
  deployment: Parameters<typeof openStreamOnDeployment>[1],
  params: CompletionParams,
  call: CompletionCall,
): Promise<{ choices: CollectedChoice[]; usage: GenerationUsage }> {
  const events = await openStreamOnDeployment(db, deployment, params, { ...call, collected: true });
  const choices = new Map<number, CollectedChoice>();
  const choice = (index: number) => {
    let c = choices.get(index);
    if (!c) choices.set(index, (c = { index, text: "", tokens: [], finish_reason: "length", stop: null }));
    return c;
  };
  let usage: GenerationUsage | undefined;
  try {
    for await (const p of pieces(events, params.logprobs !== undefined)) {
      if (p.type === "text") {
        const c = choice(p.index);
        c.text += p.text;
        c.tokens.push(...(p.tokens ?? []));
      } else if (p.type === "finish") Object.assign(choice(p.index), { finish_reason: p.finish_reason, stop: p.stop });
      else usage = p.usage;
    }
  } catch (err) {
    // The client went away: a 499 like the other paths (before, an "unhandled error" logged).
    if (call.signal?.aborted) throw abortedError(call.signal);
    throw err instanceof InferenceError ? toApiError(err) : err;
  }
  if (!usage) throw new Error("the generation ended without its usage");
  for (let i = 0; i < (params.n ?? 1); i++) choice(i);
  return { choices: [...choices.values()].sort((a, b) => a.index - b.index), usage };
}

export function toTextCompletion(
  r: { choices: CollectedChoice[]; usage: GenerationUsage },
  meta: TextCompletionMeta,
  logprobs: number | undefined,
): CompletionsResult {
  return {
    ...meta,
    object: "text_completion",
    choices: r.choices.map((c) => ({
      text: c.text,
      index: c.index,
      logprobs: logprobs === undefined ? null : textLogprobs(c.tokens, 0, logprobs),
      finish_reason: c.finish_reason,
    })),
    usage: r.usage,
  };
}
