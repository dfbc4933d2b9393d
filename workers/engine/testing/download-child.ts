// Run by hub.test.ts, twice at once: one worker process's download of a hub model into a cache
// folder that another process shares. Prints the largest progress it saw for the graph file.
import { downloadModel } from "../model/hub/download";

const [endpoint, cacheDir, id] = process.argv.slice(2);
let graphBytes = 0;
await downloadModel(id, {
  dtype: "fp32",
  hub: { endpoint, cacheDir, token: null, offline: false },
  onProgress: (p) => {
    if (p.state === "downloading" && p.file.file === "onnx/model.onnx") graphBytes = Math.max(graphBytes, p.file.done);
  },
});
console.log(JSON.stringify({ graphBytes }));
