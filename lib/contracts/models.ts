import { z } from "zod";

/**
 * What a deployment serves: a model (a local folder or a hub id) in a dtype, the file names
 * transformers.js uses (onnx/model{,_fp16,_quantized,_int8,_uint8,_q4,_q4f16,_bnb4,_q2,_q2f16}.onnx).
 * `auto` lets the engine choose (docs/api.md, "Models").
 */
export const DTYPE_CHOICES = [
  "auto",
  "fp32",
  "fp16",
  "q8",
  "int8",
  "uint8",
  "q4",
  "q4f16",
  "bnb4",
  "q2",
  "q2f16",
] as const;
export type DtypeChoice = (typeof DTYPE_CHOICES)[number];

const ONE_BIT = "1-bit MatMulNBits weights, which onnxruntime's CPU kernels do not run (they take 2, 4 and 8 bits)";

/**
 * transformers.js dtypes (v4.1+) the engine cannot serve, and why: refused when a deployment is
 * created; the engine names their files (onnx/model_<dtype>.onnx) but never loads them.
 */
export const UNSERVED_DTYPES: Record<string, string> = { q1: ONE_BIT, q1f16: ONE_BIT };

/** Why `value` is not a dtype choice: the reason for a dtype the engine cannot serve, else the list. */
export function dtypeChoiceError(value: unknown): string {
  const list = `must be one of ${DTYPE_CHOICES.join(", ")}`;
  return typeof value === "string" && Object.hasOwn(UNSERVED_DTYPES, value)
    ? `${value} is not supported: ${UNSERVED_DTYPES[value]}; ${list}`
    : list;
}

export const DtypeChoiceSchema = z.enum(DTYPE_CHOICES, { error: (issue) => dtypeChoiceError(issue.input) });

/** "org/name" or "name", with an optional "@revision" (branch, tag or commit; default main). */
const HUB_ID = /^(?:[A-Za-z0-9][\w.-]*\/)?[A-Za-z0-9][\w.-]*(?:@[\w./-]+)?$/;

/** Whether `spec` is a hub id (see HUB_ID; never a `..` path). */
export const isHubId = (spec: string) => HUB_ID.test(spec) && !spec.includes("..");

/** How workers name a model they serve in a dtype (the registry's `models` and `model_states` keys). */
export const servedModelKey = (model: string, dtype: string) => `${model}#${dtype}`;

/**
 * How a worker whose WORKER_SERVES places teams names a model it serves for one team only
 * (lib/contracts/placement.ts): requests of that team may go to it, no other team's.
 */
export const teamModelKey = (key: string, teamId: string) => `${key}|team:${teamId}`;

/** An advertised key without its team (servedModelKey's form): what may be shown beyond the team. */
export const withoutTeam = (key: string) => key.replace(/\|team:[^|]*$/, "");

/**
 * A worker's state of one served model: `pending` (known, not started), `downloading` (hub
 * files; bytes done of total), `loading` (creating the session), `ready`, or `failed` with the
 * reason (`reason` is the engine's classification: not_found, unauthorized, missing_dtype…);
 * `excluded` when the worker's WORKER_SERVES leaves the model to other workers (placement.ts).
 */
export const ModelStateSchema = z.object({
  state: z.enum(["pending", "downloading", "loading", "ready", "failed", "excluded"]),
  /** The dtype the engine chose (for `auto`), once known. */
  dtype: z.string().optional(),
  done: z.number().optional(),
  total: z.number().optional(),
  error: z.string().optional(),
  reason: z.string().optional(),
  /** Ready: how the model is served slower than it could be, and why (ModelInfo.servingNotes). */
  notes: z.array(z.string()).optional(),
  /** When this state was last reported (ISO 8601). */
  at: z.string(),
});
export type ModelState = z.infer<typeof ModelStateSchema>;
