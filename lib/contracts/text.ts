import { z } from "zod";

/** With the `u` flag a well-formed pair is one code point, so only an unpaired half matches. */
const UNPAIRED_SURROGATE = /\p{Surrogate}/u;
const NUL = "must not contain the NUL character (\\u0000)";
const SURROGATE = "must not contain an unpaired UTF-16 surrogate (\\ud800-\\udfff)";

/**
 * Text that will be stored in Postgres: `text` and `jsonb` cannot hold U+0000, and `jsonb`
 * refuses an unpaired UTF-16 surrogate (`"\ud800"` is valid JSON and a valid JS string, but not
 * Unicode). Both are refused here with a 400 naming the field, never in the database, where the
 * statement would also fail every other add batched with it (other teams' included).
 */
export const storable = <S extends z.ZodString>(schema: S) =>
  schema.refine((s) => !s.includes("\u0000"), NUL).refine((s) => !UNPAIRED_SURROGATE.test(s), SURROGATE);

/** Why `s` cannot be stored or looked up in Postgres (see storable), or null when it can. */
export const unstorable = (s: string): string | null =>
  s.includes("\u0000") ? NUL : UNPAIRED_SURROGATE.test(s) ? SURROGATE : null;

/** Text Postgres can store (no NUL, no unpaired surrogate); U+FFFD stands for what it cannot. */
export const storableText = (s: string) => s.replace(/\u0000|\p{Surrogate}/gu, "\uFFFD");

/**
 * A record that refuses the key `__proto__`: JSON.parse makes it an own key like any other, but
 * zod's record skips it without a word (a label or a logit bias silently dropped).
 */
export const recordWithoutProto = <T extends z.ZodType>(schema: T, what: string) =>
  z.preprocess((value, ctx) => {
    if (value !== null && typeof value === "object" && Object.hasOwn(value, "__proto__"))
      ctx.addIssue({ code: "custom", message: `__proto__ is not allowed as ${what}`, path: ["__proto__"] });
    return value;
  }, schema);
