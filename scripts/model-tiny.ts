// `npm run model:tiny -- <dir> [--large] [--seed N] [--family llama] [--size tiny|bench]
//   [--dtypes fp32,fp16,q8,int8,uint8,q4,q4f16,q2,q2f16] [--no-position-ids] [--gqa] [--external-data N]
//   [--num-logits-to-keep] [--use-cache-branch] [--q4-accuracy 4]`: writes a deterministic test
// model (byte-level BPE tokenizer, chat template) in the HF export layout; see tiny-model/generate.ts.
import path from "node:path";
import { WEIGHT_FORMATS, type WeightFormat } from "./tiny-model/graph-parts";
import { generateTinyModel, type TinyModelOptions } from "./tiny-model/generate";

const args = process.argv.slice(2);
const VALUED = ["--seed", "--family", "--size", "--dtypes", "--external-data", "--q4-accuracy"];
const value = (flag: string) => {
  const at = args.indexOf(flag);
  return at >= 0 ? args[at + 1] : undefined;
};
const has = (flag: string) => args.includes(flag);
const dir = args.find((a, i) => !a.startsWith("--") && !VALUED.includes(args[i - 1]));
const seed = Number(value("--seed") ?? 42);
const dtypes = value("--dtypes")?.split(",") as WeightFormat[] | undefined;
const usage =
  "usage: npm run model:tiny -- <dir> [--large] [--seed N] [--family gpt2|llama] [--size tiny|large|bench] " +
  "[--dtypes fp32,fp16,q8,int8,uint8,q4,q4f16,q2,q2f16] [--no-position-ids] [--gqa] [--external-data N] " +
  "[--num-logits-to-keep] [--use-cache-branch] [--q4-accuracy N]";
if (!dir || !Number.isInteger(seed) || dtypes?.some((d) => !WEIGHT_FORMATS.includes(d))) {
  console.error(usage);
  process.exit(2);
}
const opts: TinyModelOptions = {
  seed,
  large: has("--large"),
  family: value("--family") as TinyModelOptions["family"],
  size: value("--size") as TinyModelOptions["size"],
  dtypes,
  positions: has("--no-position-ids") ? "past-length" : undefined,
  attention: has("--gqa") ? "gqa" : undefined,
  externalData: value("--external-data") ? Number(value("--external-data")) : undefined,
  numLogitsToKeep: has("--num-logits-to-keep"),
  useCacheBranch: has("--use-cache-branch"),
  q4Accuracy: value("--q4-accuracy") ? Number(value("--q4-accuracy")) : undefined,
};
try {
  const { parameters } = await generateTinyModel(path.resolve(dir), opts);
  console.log(`wrote a ${(parameters / 1e6).toFixed(2)}M-parameter model (seed ${seed}) to ${path.resolve(dir)}`);
} catch (e) {
  console.error(`${(e as Error).message}\n${usage}`);
  process.exit(2);
}
