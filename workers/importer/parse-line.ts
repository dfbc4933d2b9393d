import { createHash } from "node:crypto";
import { AddSampleBody } from "@/lib/contracts/pipelines";
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
