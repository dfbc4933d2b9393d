// Greedy reference: transformers.js generate() on the same folder and dtype as a loaded model
// (its own session of the same graph file), returning the new token ids.
import type { PreTrainedModel } from "@huggingface/transformers";
import { AutoModelForCausalLM } from "../transformers";
import type { LoadedModel } from "../model/load-model";

const models = new Map<string, Promise<PreTrainedModel>>();

export function referenceModel(m: LoadedModel): Promise<PreTrainedModel> {
  const key = `${m.dir}\u0000${m.info.dtype}`;
  let p = models.get(key);
  if (!p) {
    p = AutoModelForCausalLM.from_pretrained(m.dir, { dtype: m.info.dtype, local_files_only: true });
    models.set(key, p);
  }
  return p;
}

export async function referenceGreedy(m: LoadedModel, prompt: string, maxNewTokens: number): Promise<number[]> {
  const model = await referenceModel(m);
  const enc = m.tokenizer(prompt);
  const out = (await model.generate({ ...enc, max_new_tokens: maxNewTokens, do_sample: false })) as unknown as {
    tolist(): bigint[][];
  };
  const promptLength = enc.input_ids.dims[1];
  return out.tolist()[0].slice(promptLength).map(Number);
}
