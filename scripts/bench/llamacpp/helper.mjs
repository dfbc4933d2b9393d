// Child process of scripts/bench/llamacpp.ts, copied into the tools folder where node-llama-cpp
// and @huggingface/gguf are installed (never into the repository's node_modules). One command a run,
// one JSON line on stdout:
//   node helper.mjs meta <file.gguf>
//     metadata and tensor table, read back by an independent GGUF reader (@huggingface/gguf)
//   node helper.mjs greedy <file.gguf> <threads> <comma-separated prompt ids> <tokens>
//     llama.cpp's greedy continuation of the prompt ids (EOS included and decoded past), and its
//     next-token probabilities after the prompt (top 8), through node-llama-cpp's prebuilt binary
import path from "node:path";

const [cmd, file, ...rest] = process.argv.slice(2);

if (cmd === "meta") {
  const { gguf } = await import("@huggingface/gguf");
  const { metadata, tensorInfos } = await gguf(path.resolve(file), { allowLocalFile: true });
  const meta = {};
  for (const [k, v] of Object.entries(metadata)) {
    if (Array.isArray(v)) meta[k] = { length: v.length };
    else meta[k] = typeof v === "bigint" ? Number(v) : v;
  }
  const tensors = tensorInfos.map((t) => ({ name: t.name, shape: t.shape.map(Number), dtype: t.dtype }));
  console.log(JSON.stringify({ meta, tensors }));
} else if (cmd === "greedy") {
  const { getLlama, LlamaLogLevel } = await import("node-llama-cpp");
  const threads = Number(rest[0]);
  const prompt = rest[1].split(",").map(Number);
  const steps = Number(rest[2]);
  const llama = await getLlama({
    gpu: false,
    build: "never",
    skipDownload: true,
    usePrebuiltBinaries: true,
    maxThreads: threads,
    logLevel: LlamaLogLevel.error,
  });
  const model = await llama.loadModel({ modelPath: path.resolve(file), gpuLayers: 0 });
  const ctx = await model.createContext({ contextSize: 512, sequences: 2, threads, flashAttention: false });
  const tokens = [];
  for await (const t of ctx.getSequence().evaluate(prompt, { temperature: 0, yieldEogToken: true })) {
    tokens.push(t);
    if (tokens.length >= steps) break;
  }
  let top = [];
  for await (const r of ctx
    .getSequence()
    .evaluateWithMetadata(prompt, { probabilities: true }, { temperature: 1, topK: 0, topP: 1, minP: 0 })) {
    top = [...r.probabilities.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 8)
      .map(([id, p]) => ({ id, p }));
    break;
  }
  console.log(JSON.stringify({ tokens, top, release: llama.llamaCppRelease }));
  await ctx.dispose();
  await model.dispose();
  await llama.dispose();
} else {
  console.error("usage: helper.mjs meta <gguf> | greedy <gguf> <threads> <ids> <tokens>");
  process.exit(2);
}
