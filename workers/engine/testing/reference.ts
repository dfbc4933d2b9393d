// Greedy reference: transformers.js generate() on the same model, returning new token ids.
import type { LoadedModel } from "../model-loader";

export async function referenceGreedy(m: LoadedModel, prompt: string, maxNewTokens: number): Promise<number[]> {
  const enc = m.tokenizer(prompt);
  const out = (await m.model.generate({ ...enc, max_new_tokens: maxNewTokens, do_sample: false })) as unknown as {
    tolist(): bigint[][];
  };
  const promptLength = enc.input_ids.dims[1];
  return out.tolist()[0].slice(promptLength).map(Number);
}
