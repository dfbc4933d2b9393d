// `npm run model:tiny -- <dir> [--large] [--seed N]`: writes the deterministic tiny GPT-2-style
// ONNX model (KV cache, byte-level BPE tokenizer, chat template) in the HF export layout.
import path from "node:path";
import { generateTinyModel } from "./tiny-model/generate";

const args = process.argv.slice(2);
const large = args.includes("--large");
const seedAt = args.indexOf("--seed");
const seed = seedAt >= 0 ? Number(args[seedAt + 1]) : 42;
const dir = args.find((a, i) => !a.startsWith("--") && args[i - 1] !== "--seed");
if (!dir || !Number.isInteger(seed)) {
  console.error("usage: npm run model:tiny -- <dir> [--large] [--seed N]");
  process.exit(2);
}
const { parameters } = await generateTinyModel(path.resolve(dir), { seed, large });
console.log(
  `wrote ${large ? "large" : "tiny"} model (seed ${seed}, ${(parameters / 1e6).toFixed(2)}M parameters) to ${path.resolve(dir)}`,
);
