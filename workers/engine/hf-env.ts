// transformers.js global settings: offline by default (no weights are ever fetched unless
// explicitly allowed), local folders allowed, a local cache folder.
import { env } from "@huggingface/transformers";
import os from "node:os";
import path from "node:path";

export interface HfEnvOptions {
  allowRemote?: boolean;
  cacheDir?: string;
}

export function configureHfEnv(opts: HfEnvOptions = {}) {
  env.allowRemoteModels = opts.allowRemote ?? process.env.ENGINE_ALLOW_REMOTE_MODELS === "1";
  env.allowLocalModels = true;
  env.cacheDir = opts.cacheDir ?? process.env.ENGINE_MODEL_CACHE_DIR ?? path.join(os.tmpdir(), "lmp-hf-cache");
}
