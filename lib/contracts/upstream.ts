// The dialects of OpenAI-compatible servers an upstream deployment may front
// (lib/inference/backends/capabilities.ts says what each one takes).
import { z } from "zod";

export const UPSTREAM_KINDS = ["vllm", "tgi", "llamacpp", "ollama", "openai"] as const;
export type UpstreamKind = (typeof UPSTREAM_KINDS)[number];
export const UpstreamKindSchema = z.enum(UPSTREAM_KINDS);

/** An upstream's base URL: http(s), no query or fragment; `/v1/completions` is appended (a trailing `/v1` is fine). */
export const UpstreamUrl = z
  .string()
  .trim()
  .url("must be an http:// or https:// URL")
  .refine((u) => /^https?:\/\//i.test(u), "must be an http:// or https:// URL")
  .refine((u) => !u.includes("?") && !u.includes("#"), "must not have a query or fragment")
  .transform((u) => u.replace(/\/+$/, "").replace(/\/v1$/, ""));

export const UpstreamInput = z.strictObject({
  kind: UpstreamKindSchema.default("openai"),
  urls: z.array(UpstreamUrl).min(1, "give at least one URL").max(32),
  model: z.string().trim().min(1, "must not be empty").max(1000),
  /** The bearer key the upstream takes (stored encrypted, never returned). */
  key: z.string().min(1).max(4096).optional(),
});
export type UpstreamInput = z.input<typeof UpstreamInput>;

/** What the API and dashboard show of an upstream deployment: never its key. */
export const UpstreamDto = z.strictObject({
  kind: UpstreamKindSchema,
  urls: z.array(z.string()),
  model: z.string(),
  hasKey: z.boolean(),
});
export type UpstreamDto = z.infer<typeof UpstreamDto>;

/** A URL as shown (API, dashboard, CLI, logs): user information, if any, hidden. */
export const shownUrl = (url: string) => url.replace(/^(https?:\/\/)[^@/]*@/i, "$1***@");
