import { z } from "zod";

/** GET /v1/usage's query: days (UTC) both included; default the last 30 days. */
const day = z.iso
  .date("must be a date like 2026-11-23")
  .refine((s) => !s.startsWith("0000"), "must be in year 0001 or later"); // Postgres has no year 0000

export const UsageQuery = z
  .strictObject({
    from: day.optional(),
    to: day.optional(),
    groupBy: z.enum(["day", "key", "deployment"], { error: "must be day, key or deployment" }).default("day"),
  })
  .transform((q) => {
    const to = q.to ?? new Date().toISOString().slice(0, 10);
    const from = q.from ?? new Date(Date.parse(`${to}T00:00:00Z`) - 29 * 86_400_000).toISOString().slice(0, 10);
    return { ...q, from, to };
  })
  .refine((q) => q.from <= q.to, { message: "must not be after 'to'", path: ["from"] })
  .refine((q) => Date.parse(q.to) - Date.parse(q.from) <= 366 * 86_400_000, {
    message: "a range of at most 366 days",
    path: ["from"],
  });

export const UsageRowSchema = z.object({
  day: z.string().optional(),
  key: z.string().optional(),
  deployment: z.string().optional(),
  requests: z.number(),
  prompt_tokens: z.number(),
  completion_tokens: z.number(),
});
export const UsageResponse = z.strictObject({ data: z.array(UsageRowSchema) });

/** What the dashboard's usage page charts (GET /api/ui/usage). */
export type UsageDashboard = {
  from: string;
  to: string;
  byDay: { day: string; requests: number; promptTokens: number; completionTokens: number }[];
  byDeployment: {
    name: string;
    requests: number;
    tokens: number;
    ttftP50Ms: number | null;
    ttftP95Ms: number | null;
  }[];
  byKey: { name: string; requests: number; tokens: number }[];
};
