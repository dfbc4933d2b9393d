import { createHash } from "node:crypto";
import { AddSampleBody } from "@/lib/contracts/pipelines";
import { storableText } from "@/lib/contracts/text";
import type { ErrorBody } from "@/lib/errors";
import { fromZodError, payloadTooLarge } from "@/lib/errors";
import type { AddSampleInput } from "@/lib/contracts/pipelines";
import type { Line } from "./line-reader";

type ErrorObject = ErrorBody["error"];
export type ParsedLine =
  { kind: "blank" } | { kind: "sample"; sample: AddSampleInput } | { kind: "refused"; error: ErrorObject };

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * One line of an import as an add body, or why it is refused (the same errors `add` answers, with
 * the same `param`). Blank lines (whitespace only) are skipped; a trailing `\r` is dropped.
 */
export function parseLine(line: Line, maxBytes: number): ParsedLine {
  const parsed = parseLineRaw(line, maxBytes);
  return parsed.kind === "refused" ? { kind: "refused", error: storableRefusal(parsed.error) } : parsed;
}

/** Characters of a refusal's message and param kept: the report says why, not the line again. */
const REFUSAL_CHARS = 300;

/**
 * A refusal as the import's report can store it (jsonb): its texts quote the line (JSON.parse's
 * message, an unknown key named by zod), which may hold U+0000 or half of a surrogate pair that
 * jsonb refuses, which failed the whole chunk, and then the import; and a refusal repeating a
 * half-megabyte key bloated every poll of the import's status. Cut and made storable.
 */
function storableRefusal(error: ErrorObject): ErrorObject {
  const clean = (s: string) => {
    const text = storableText(s);
    return text.length > REFUSAL_CHARS ? `${text.slice(0, REFUSAL_CHARS)}…` : text;
  };
  return {
    ...error,
    message: clean(error.message),
    ...(error.param !== undefined ? { param: clean(error.param) } : {}),
  };
}

function parseLineRaw(line: Line, maxBytes: number): ParsedLine {
  if (line.tooLong) return { kind: "refused", error: payloadTooLarge(maxBytes).toBody().error };
  let text: string;
  try {
    text = utf8.decode(line.bytes);
  } catch {
    return { kind: "refused", error: { type: "invalid_request", message: "The line is not valid UTF-8." } };
  }
  if (text.trim() === "") return { kind: "blank" };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return {
      kind: "refused",
      error: { type: "invalid_request", message: `The line is not valid JSON: ${(err as Error).message}` },
    };
  }
  const parsed = AddSampleBody.safeParse(value);
  if (!parsed.success) return { kind: "refused", error: fromZodError(parsed.error).toBody().error };
  return { kind: "sample", sample: parsed.data };
}

const ID_SPACE = 36n ** 20n;

/**
 * The id of the sample of line `number` of import `importId`: derived, not random, so that the
 * same line can never become two samples (storeImportChunk skips ids that exist).
 */
export function importedSampleId(importId: string, number: number): string {
  const digest = createHash("sha256").update(`${importId}:${number}`).digest("hex");
  return `smp_${(BigInt(`0x${digest.slice(0, 32)}`) % ID_SPACE).toString(36).padStart(20, "0")}`;
}
