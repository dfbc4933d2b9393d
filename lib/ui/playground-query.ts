import { DeploymentCompletionBody } from "../contracts/deployments";

/**
 * The playground's request travels as a GET query (it is read as an event stream): every
 * sampling parameter of the deployment endpoint but `n` and `echo` (the playground shows one
 * completion), including those the public GET stream leaves out (`logprobs`, `tfs`, `bad_words`,
 * `logit_bias`). Numbers are numbers, lists and maps JSON; validated by the endpoint's own schema.
 * `pipeline` (a pipeline id): "save to pipeline", the completion is captured there once finished.
 */
export const PLAYGROUND_NUMBERS = [
  "max_tokens",
  "temperature",
  "top_p",
  "top_k",
  "repetition_penalty",
  "seed",
  "logprobs",
  "tfs",
] as const;

/** Parameters whose value travels as JSON: `stop` and `bad_words` arrays, the `logit_bias` map. */
export const PLAYGROUND_JSON = ["stop", "bad_words", "logit_bias"] as const;

export type PlaygroundParams = {
  prompt: string;
  max_tokens?: number;
  temperature?: number;
  top_p?: number;
  top_k?: number;
  repetition_penalty?: number;
  seed?: number;
  logprobs?: number;
  tfs?: number;
  stop?: string[];
  bad_words?: string[];
  logit_bias?: Record<string, number>;
  /** Capture into this pipeline (its id). */
  pipeline?: { id: string };
};

export function toPlaygroundSearch(p: PlaygroundParams): string {
  const q = new URLSearchParams({ prompt: p.prompt });
  for (const k of PLAYGROUND_NUMBERS) if (p[k] !== undefined) q.set(k, String(p[k]));
  for (const k of PLAYGROUND_JSON) if (p[k] !== undefined) q.set(k, JSON.stringify(p[k]));
  if (p.pipeline) q.set("pipeline", p.pipeline.id);
  return q.toString();
}

/** The query back into the deployment body's schema (unknown parameters are refused). */
export function parsePlaygroundSearch(search: URLSearchParams) {
  const raw: Record<string, unknown> = {};
  for (const [k, v] of search) {
    if ((PLAYGROUND_NUMBERS as readonly string[]).includes(k)) raw[k] = v.trim() === "" ? NaN : Number(v);
    else if ((PLAYGROUND_JSON as readonly string[]).includes(k)) {
      try {
        raw[k] = JSON.parse(v);
      } catch {
        raw[k] = v;
      }
    } else if (k === "pipeline") raw.pipeline = { id: v };
    else raw[k] = v;
  }
  return PlaygroundBody.safeParse(raw);
}

/** The deployment body without `stream`, `n` and `echo` (the playground shows one completion). */
export const PlaygroundBody = DeploymentCompletionBody.superRefine((b, ctx) => {
  for (const key of ["stream", "n", "echo"] as const) {
    if (b[key] !== undefined) ctx.addIssue({ code: "custom", path: [key], message: "not available in the playground" });
  }
});
