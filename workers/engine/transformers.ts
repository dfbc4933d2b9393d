// transformers.js, as every part of the worker (and the tests and benchmarks that compare with it)
// loads it at run time: its CommonJS build, through require. One copy per process: the two builds
// have classes of their own (a tokenizer's tensors from one are not inputs to the other's model).
//
// Why not `import`: the worker runs under tsx's ESM loader (workerProcessArgs in
// scripts/lib/app-process.ts), which processes every ESM file it loads, the package's 1.3 MB
// bundle among them: about 130 MB of resident memory more than the require, which that loader
// leaves to Node. Types come from the package itself (`import type`).
import { createRequire } from "node:module";

const transformers = createRequire(import.meta.url)(
  "@huggingface/transformers",
) as typeof import("@huggingface/transformers");

export const { AutoModelForCausalLM, AutoTokenizer, env } = transformers;
