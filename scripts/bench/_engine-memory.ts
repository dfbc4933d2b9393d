// Child process of bench/engine.ts: resident memory a loaded model adds, measured in a fresh
// process (in the bench's own, memory freed by earlier dtypes would be reused and hide it).
// Prints one JSON line: {"before": bytes, "after": bytes}.
import { loadModel } from "../../workers/engine/model/load-model";
import type { Dtype } from "../../workers/engine/model/dtypes";

const [dir, dtype, rowWise] = process.argv.slice(2);
await import("onnxruntime-node"); // the runtime itself is not the model's
await import("../../workers/engine/transformers"); // as the worker loads it
const before = process.memoryUsage().rss;
const m = await loadModel(dir, { dtype: dtype as Dtype, rowWiseQuantization: rowWise !== "off" });
const after = process.memoryUsage().rss;
console.log(JSON.stringify({ before, after }));
await m.dispose();
