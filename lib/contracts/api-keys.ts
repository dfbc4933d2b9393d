import { z } from "zod";
import { storable } from "./text";

/** Creating a key from the dashboard (the CLI's key:create takes the same fields). */
export const CreateKeyBody = z
  .strictObject({
    name: storable(z.string().trim().max(100, "must be at most 100 characters")).optional(),
    kind: z.enum(["api", "model"], { error: "must be 'api' or 'model'" }),
    /** Model keys only: restricts the key to one deployment of the team. */
    deploymentId: z
      .string()
      .nullish()
      .transform((v) => v || undefined),
    /**
     * Model keys only: the pipelines the key may capture completions into (docs/api.md,
     * "Capture"); absent or null: any pipeline of the team; []: none.
     */
    capturePipelines: z
      .array(storable(z.string().min(1, "must not be empty").max(200, "must be at most 200 characters")))
      .max(100, "must list at most 100 pipelines")
      .nullish(),
  })
  .refine((k) => k.kind === "model" || !k.deploymentId, {
    message: "only model keys can be scoped to a deployment",
    path: ["deploymentId"],
  })
  .refine((k) => k.kind === "model" || k.capturePipelines == null, {
    message: "only model keys have a capture scope (an API key may write to any pipeline of its team)",
    path: ["capturePipelines"],
  });
export type CreateKeyInput = z.input<typeof CreateKeyBody>;

export const ApiKeySchema = z.object({
  id: z.string(),
  kind: z.enum(["api", "model"]),
  name: z.string().nullable(),
  prefix: z.string(),
  deploymentName: z.string().nullable(),
  /** Model keys: the pipelines it may capture into; null: any pipeline of the team; []: none. */
  capturePipelines: z.array(z.string()).nullable(),
  /** The email of the member who made it on the dashboard; null for the CLI's. */
  createdBy: z.string().nullable(),
  createdAt: z.iso.datetime(),
  lastUsedAt: z.iso.datetime().nullable(),
  revokedAt: z.iso.datetime().nullable(),
});
export type ApiKeyDto = z.infer<typeof ApiKeySchema>;
