// Run by stop-drain.test.ts in a child process: usage counted (its timer far away) and a slow
// drainer, then a SIGTERM to itself, as a stop would send. MODE=next adds a listener that exits
// on the signal as Next.js' does (after a moment); MODE=alone has none; MODE=hung's drainer never ends.
import type { DbOrTx } from "../../db/client";
import { recordUsage } from "../../services/usage";
import { drainOnStop } from "../stop-drain";

const mode = process.env.MODE;
const db = {
  execute: async () => {
    await new Promise((r) => setTimeout(r, 200));
    console.log("usage written");
  },
} as unknown as DbOrTx;
if (mode === "next") process.on("SIGTERM", () => setTimeout(() => process.exit(0), 20));
recordUsage(db, { teamId: "t", keyId: null, deploymentId: "d", promptTokens: 3, completionTokens: 4 });
drainOnStop("slow", () =>
  mode === "hung"
    ? new Promise(() => {})
    : new Promise<void>((r) => setTimeout(r, 300)).then(() => console.log("slow drained")),
);
setInterval(() => {}, 1000); // a server's handles keep it alive
setTimeout(() => process.kill(process.pid, "SIGTERM"), 50);
