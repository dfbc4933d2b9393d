// `npm run bench -- <name> [args...]` runs scripts/bench/<name>.ts, whose default export
// is `async (args: string[]) => void`. Each bench prints its figures and ends with one JSON line.
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";

const [name, ...args] = process.argv.slice(2);
const dir = path.join(import.meta.dirname, "bench");
const available = (existsSync(dir) ? readdirSync(dir) : [])
  .filter((f) => f.endsWith(".ts") && !f.startsWith("_"))
  .map((f) => f.replace(/\.ts$/, ""));
if (!name || !available.includes(name)) {
  console.error(`usage: npm run bench -- <${available.join("|")}> [args...]`);
  process.exit(2);
}
const mod = (await import(path.join(dir, `${name}.ts`))) as { default: (a: string[]) => Promise<void> };
await mod.default(args);
process.exit(0);
