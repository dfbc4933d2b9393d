import type { BatchItemResult } from "../contracts/batch";
import { AddSampleBody, type AddSampleInput } from "../contracts/pipelines";
import type { DbOrTx } from "../db/client";
import { ApiError, fromZodError, payloadTooLarge } from "../errors";
import { addSamples } from "./samples";

/**
 * add-batch: each item is checked on its own (AddSampleBody, and at most `maxItemBytes` of JSON,
 * the limit of one `add`), the valid ones are stored together (addSamples), and every item gets
 * its result in request order: `{id}` or `{error}` with `param` naming the field from the
 * request's root (`samples[3].messages[0].role`). Valid items are stored whatever the others.
 */
export async function addBatch(
  db: DbOrTx,
  input: { teamId: string; pipelineId: string; items: unknown[]; maxItemBytes: number; requestId: string },
): Promise<BatchItemResult[]> {
  const results: BatchItemResult[] = new Array(input.items.length);
  const valid: { index: number; sample: AddSampleInput }[] = [];
  input.items.forEach((item, index) => {
    const prefix = `samples[${index}]`;
    if (Buffer.byteLength(JSON.stringify(item) ?? "") > input.maxItemBytes) {
      results[index] = { error: { ...payloadTooLarge(input.maxItemBytes).toBody().error, param: prefix } };
      return;
    }
    const parsed = AddSampleBody.safeParse(item);
    if (parsed.success) valid.push({ index, sample: parsed.data });
    else results[index] = { error: fromZodError(parsed.error, prefix).toBody().error };
  });
  const stored = await addSamples(db, {
    teamId: input.teamId,
    pipelineId: input.pipelineId,
    samples: valid.map((v) => v.sample),
  });
  stored.forEach((r, i) => {
    const index = valid[i]!.index;
    if (!(r instanceof Error)) results[index] = r;
    else if (r instanceof ApiError) results[index] = { error: r.toBody().error };
    else {
      console.error(`[${input.requestId}] add-batch item ${index} failed`, r);
      results[index] = {
        error: { type: "internal", message: `Internal server error (request id ${input.requestId}).` },
      };
    }
  });
  return results;
}
