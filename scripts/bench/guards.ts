// `npm run bench -- guards`: what one request can cost the worker's thread, which every stream on
// the worker shares, before and while it generates (workers/engine/request-plan.ts,
// workers/engine/stop-matcher.ts). On the shared llama checkpoint (a 32,000-entry vocabulary
// whose longest entry is 16 characters), in the same run:
//   huge_prompt_refusal_ms   planRequest on a 1,000,000-character prompt (refused: longer than
//                            2048 × 16 characters, never tokenized)
//   long_prompt_refusal_ms   planRequest on 24,000 characters of "a " (refused once its first
//                            8,196 characters alone are past the limit)
//   tokenize_240k_ms         the reference: tokenizing 240,000 characters of text, which a
//                            prompt that cannot fit used to cost before its 400
//   refusal_vs_tokenize      long_prompt_refusal_ms ÷ tokenize_240k_ms (below 1: cheaper)
//   stops_ms_per_token       the stop matcher's time per 4-character token, with 16 stops of up
//                            to 1,000 characters (the limit) built to match as far as they can
//                            (periodic prefixes of the generated text), over 2,048 tokens
// Last line: {"bench":"guards",…}.
import { loadModel } from "../../workers/engine/model/load-model";
import { planRequest } from "../../workers/engine/request-plan";
import { StopMatcher } from "../../workers/engine/stop-matcher";
import { llamaModelDir } from "../../workers/engine/testing/models";

const round = (x: number) => Math.round(x * 1000) / 1000;

/** Median ms of `runs` calls of `f` (which is expected to throw, for a refusal). */
function median(runs: number, f: () => void): number {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    try {
      f();
    } catch {
      // a refusal: what is timed
    }
    times.push(performance.now() - t);
  }
  return times.sort((a, b) => a - b)[Math.floor(runs / 2)]!;
}

export default async function bench() {
  const model = await loadModel(await llamaModelDir());
  try {
    const huge = "word ".repeat(200_000);
    const long = "a ".repeat(12_000);
    const huge_prompt_refusal_ms = median(5, () => planRequest(model, { prompt: huge, max_tokens: 4 }));
    const long_prompt_refusal_ms = median(5, () => planRequest(model, { prompt: long, max_tokens: 4 }));
    const text = "word ".repeat(48_000);
    const tokenize_240k_ms = median(3, () => model.tokenizer.encode(text));
    const token = "abcd";
    const stops = Array.from({ length: 16 }, (_, i) => (token.repeat(250 - i) + "b").slice(-1000));
    const matcher = new StopMatcher(stops);
    const t = performance.now();
    for (let i = 0; i < 2048; i++) matcher.push(token);
    const stops_ms_per_token = (performance.now() - t) / 2048;
    const figures = {
      huge_prompt_refusal_ms: round(huge_prompt_refusal_ms),
      long_prompt_refusal_ms: round(long_prompt_refusal_ms),
      tokenize_240k_ms: round(tokenize_240k_ms),
      refusal_vs_tokenize: round(long_prompt_refusal_ms / tokenize_240k_ms),
      stops_ms_per_token: round(stops_ms_per_token),
    };
    console.log(JSON.stringify({ bench: "guards", ...figures }));
  } finally {
    await model.dispose();
  }
}
