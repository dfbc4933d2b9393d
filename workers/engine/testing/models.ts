// Test fixtures: the generated tiny model (cached per machine) and a private copy of the
// third-party tiny-random-llama checkpoint.
import { existsSync } from "node:fs";
import { cp, mkdtemp } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { cachedTinyModel } from "@/scripts/tiny-model/generate";

const repoRoot = path.resolve(import.meta.dirname, "../../..");

export const tinyModelDir = (seed = 42) => cachedTinyModel({ seed });

export async function llamaModelDir(): Promise<string> {
  const src = process.env.TINY_LLAMA_DIR ?? path.resolve(repoRoot, "../shared/models/tiny-random-llama");
  if (!existsSync(path.join(src, "config.json"))) {
    throw new Error(
      `The tiny-random-llama test checkpoint is not at ${src}: the checkout must sit next to the ` +
        "workspace's shared/ folder, or TINY_LLAMA_DIR must name the checkpoint's folder.",
    );
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), "lmp-llama-"));
  await cp(src, dir, { recursive: true });
  return dir;
}
