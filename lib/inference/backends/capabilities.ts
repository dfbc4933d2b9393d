// What each kind of upstream server takes, in one place (docs/api.md "Upstream deployments"
// prints the same table). Every platform parameter a request carries is either forwarded under
// the upstream's own name or refused with a 400 that names it and the backend: never dropped.
import type { UpstreamKind } from "../../contracts/upstream";
import type { GenerationRequestInput } from "../../contracts/generation";
import { invalidRequest } from "../../errors";

/** The upstream endpoint a request goes to: `prompt` → /v1/completions, `messages` → /v1/chat/completions. */
export type UpstreamEndpoint = "completions" | "chat";

/**
 * The parameters that need the kind's support. `max_tokens`, `temperature`, `top_p` and `stop`
 * are OpenAI's own and go to every kind under those names.
 */
export const OPTIONAL_PARAMS = [
  "top_k",
  "repetition_penalty",
  "n",
  "echo",
  "seed",
  "logit_bias",
  "logprobs",
  "bad_words",
  "tfs",
] as const;
export type OptionalParam = (typeof OPTIONAL_PARAMS)[number];

/** How a kind takes a parameter: its name there, and on which of its endpoints (default both). */
type Support = { as: string; only?: UpstreamEndpoint };

export const BACKEND_LABEL: Record<UpstreamKind, string> = {
  vllm: "vLLM",
  tgi: "TGI",
  llamacpp: "llama.cpp server",
  ollama: "Ollama",
  openai: "OpenAI-compatible",
};

/** The capability table. A parameter missing from a kind's row is refused on that kind. */
export const CAPABILITIES: Record<UpstreamKind, Partial<Record<OptionalParam, Support>>> = {
  // vLLM's OpenAI server takes its sampling parameters as extra body fields.
  vllm: {
    top_k: { as: "top_k" },
    repetition_penalty: { as: "repetition_penalty" },
    n: { as: "n" },
    echo: { as: "echo", only: "completions" },
    seed: { as: "seed" },
    logit_bias: { as: "logit_bias" },
    logprobs: { as: "logprobs" },
    bad_words: { as: "bad_words" },
  },
  // TGI's Messages API and its /v1/completions (no top_k, n, echo or logit_bias there; logprobs
  // only on chat).
  tgi: {
    repetition_penalty: { as: "repetition_penalty", only: "completions" },
    seed: { as: "seed" },
    logprobs: { as: "logprobs", only: "chat" },
  },
  // llama.cpp's server: its own name for the repetition penalty; one choice per request.
  llamacpp: {
    top_k: { as: "top_k" },
    repetition_penalty: { as: "repeat_penalty" },
    seed: { as: "seed" },
    logit_bias: { as: "logit_bias" },
    logprobs: { as: "logprobs", only: "chat" },
  },
  // Ollama's OpenAI compatibility layer: only OpenAI's own fields.
  ollama: {
    seed: { as: "seed" },
  },
  // Any server that speaks OpenAI's API and no more.
  openai: {
    n: { as: "n" },
    echo: { as: "echo", only: "completions" },
    seed: { as: "seed" },
    logit_bias: { as: "logit_bias" },
    logprobs: { as: "logprobs" },
  },
};

/**
 * The parameters `kind` cannot honour on `endpoint` (the dashboard's playground disables their
 * controls rather than let a first try fail).
 */
export function unsupportedParams(kind: UpstreamKind, endpoint: UpstreamEndpoint): OptionalParam[] {
  return OPTIONAL_PARAMS.filter((p) => {
    const support = CAPABILITIES[kind][p];
    return !support || (support.only !== undefined && support.only !== endpoint);
  });
}

/** Whether a request's value asks for anything (the neutral values change nothing, so they need no support). */
function given(param: OptionalParam, v: unknown): boolean {
  if (v === undefined || v === null) return false;
  switch (param) {
    case "tfs":
    case "repetition_penalty":
    case "n":
      return v !== 1;
    case "echo":
      return v !== false;
    case "bad_words":
      return (v as unknown[]).length > 0;
    case "logit_bias":
      return Object.keys(v as object).length > 0;
    default:
      return true;
  }
}

/**
 * The body of the upstream request for `request` (the platform's generation request), or a 400
 * naming the first parameter `kind` cannot honour.
 */
export function upstreamBody(
  kind: UpstreamKind,
  model: string,
  request: GenerationRequestInput,
): { endpoint: UpstreamEndpoint; body: Record<string, unknown> } {
  const endpoint: UpstreamEndpoint = request.messages ? "chat" : "completions";
  const backend = BACKEND_LABEL[kind];
  const body: Record<string, unknown> = { model };
  if (endpoint === "chat") body.messages = request.messages;
  else {
    if (typeof request.prompt !== "string")
      throw invalidRequest(`A prompt of token ids cannot be sent to the ${backend} backend.`, "prompt");
    body.prompt = request.prompt;
  }
  body.max_tokens = request.max_tokens ?? 16;
  if (request.temperature !== undefined) body.temperature = request.temperature;
  if (request.top_p !== undefined) {
    // vLLM and TGI refuse 0 (their range is (0, 1]; TGI's even (0, 1)): said here, by name.
    if (request.top_p === 0 && (kind === "vllm" || kind === "tgi"))
      throw invalidRequest(
        `The ${backend} backend takes 'top_p' above 0 (for the most likely token only, use temperature 0).`,
        "top_p",
      );
    // 1 is "off", which TGI refuses as a value: left out there, where off is its default.
    if (!(kind === "tgi" && request.top_p === 1)) body.top_p = request.top_p;
  }
  if (request.stop?.length) body.stop = request.stop;
  for (const param of OPTIONAL_PARAMS) {
    const value = request[param];
    if (!given(param, value)) continue;
    const support = CAPABILITIES[kind][param];
    if (!support || (support.only && support.only !== endpoint)) {
      const where = support?.only ? ` (only on its ${support.only === "chat" ? "chat" : "text"} completions)` : "";
      throw invalidRequest(`The ${backend} backend of this deployment does not support '${param}'${where}.`, param);
    }
    if (param === "logit_bias") {
      const bias = value as Record<string, number>;
      for (const key of Object.keys(bias))
        if (!/^\d+$/.test(key))
          throw invalidRequest(
            `The ${backend} backend takes logit_bias keys as token ids only ('${key}' is not one).`,
            "logit_bias",
          );
      body[support.as] = bias;
    } else if (param === "logprobs" && endpoint === "chat") {
      body.logprobs = true;
      body.top_logprobs = value;
    } else body[support.as] = value;
  }
  if (kind === "llamacpp") {
    // llama.cpp's own defaults (temperature 0.8, top_k 40, top_p 0.95, min_p 0.05) would apply
    // to what is not sent: the platform's (1, off, 1, none) are sent instead.
    body.temperature ??= 1;
    body.top_p ??= 1;
    body.top_k ??= 0;
    body.min_p = 0;
  }
  body.stream = true;
  body.stream_options = { include_usage: true };
  return { endpoint, body };
}
