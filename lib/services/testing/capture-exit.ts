// Run by capture.test.ts in a child process: one capture whose write cannot finish (the
// database never answers), then the process exits as a stopped app would.
import type { DbOrTx } from "../../db/client";
import { captureCompletion } from "../capture";

const never = new Proxy({}, { get: () => () => new Promise(() => {}) }) as unknown as DbOrTx;
captureCompletion(
  never,
  {
    teamId: "team_a",
    pipelineId: "pipe_a",
    messages: [{ role: "user", content: "Hello" }],
    facts: { endpoint: "deployment", deployment: "t/d", deploymentId: "dep", model: "m", requestId: "req_1" },
  },
  [
    { index: 0, text: "one", finish_reason: "stop", stop: null },
    { index: 1, text: "two", finish_reason: "length", stop: null },
  ],
  { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 },
  { latencyMs: 5, streamed: false },
);
setTimeout(() => process.exit(0), 50);
