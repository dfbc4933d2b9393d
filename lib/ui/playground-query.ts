import { DeploymentCompletionBody } from "../contracts/deployments";

/**
 * The playground's request, POSTed as JSON to /api/ui/deployments/:name/stream (a prompt of any
 * length: a query string would meet the server's 16 KiB header limit, or a proxy's 8 KiB): every
 * sampling parameter of the deployment endpoint but `n` and `echo` (the playground shows one
 * completion). `pipeline` (a pipeline id): "save to pipeline", the completion is captured there
 * once finished.
 */
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

/** The deployment body without `stream`, `n` and `echo` (the playground shows one completion). */
export const PlaygroundBody = DeploymentCompletionBody.superRefine((b, ctx) => {
  for (const key of ["stream", "n", "echo"] as const) {
    if (b[key] !== undefined) ctx.addIssue({ code: "custom", path: [key], message: "not available in the playground" });
  }
});
