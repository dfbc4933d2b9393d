import { DeploymentCompletionBody } from "../contracts/deployments";

/**
 * The playground's request travels as a GET query (it is read as an event stream): every
 * sampling parameter of the deployment endpoint, plus `logprobs`, which the public GET stream
 * leaves out. Numbers are numbers, `stop` a JSON array; validated by the endpoint's own schema.
 */
export const PLAYGROUND_NUMBERS = [
  "max_tokens",
  "temperature",
  "top_p",
  "top_k",
  "repetition_penalty",
  "seed",
  "logprobs",
] as const;

export type PlaygroundParams = {
  prompt: string;
  max_tokens?: number;
  temperature?: number;
  top_p?: number;
  top_k?: number;
  repetition_penalty?: number;
  seed?: number;
  logprobs?: number;
  stop?: string[];
};

export function toPlaygroundSearch(p: PlaygroundParams): string {
  const q = new URLSearchParams({ prompt: p.prompt });
  for (const k of PLAYGROUND_NUMBERS) if (p[k] !== undefined) q.set(k, String(p[k]));
  if (p.stop && p.stop.length > 0) q.set("stop", JSON.stringify(p.stop));
  return q.toString();
}

/** The query back into the deployment body's schema (unknown parameters are refused). */
export function parsePlaygroundSearch(search: URLSearchParams) {
  const raw: Record<string, unknown> = {};
  for (const [k, v] of search) {
    if ((PLAYGROUND_NUMBERS as readonly string[]).includes(k)) raw[k] = v.trim() === "" ? NaN : Number(v);
    else if (k === "stop") {
      try {
        raw[k] = JSON.parse(v);
      } catch {
        raw[k] = v;
      }
    } else raw[k] = v;
  }
  return PlaygroundBody.safeParse(raw);
}

/** The deployment body without `stream`, `n` and `echo` (the playground shows one completion). */
export const PlaygroundBody = DeploymentCompletionBody.superRefine((b, ctx) => {
  for (const key of ["stream", "n", "echo"] as const) {
    if (b[key] !== undefined) ctx.addIssue({ code: "custom", path: [key], message: "not available in the playground" });
  }
});
