// Which dtypes a model offers and which one `auto` would take, without loading it: for the API
// to refuse a deployment's dtype at creation instead of at its first request.
import path from "node:path";
import { loadError } from "../errors";
import { availableDtypes, chooseAutoDtype, type Dtype } from "./dtypes";
import { hubFetch, hubError, listRepoFiles, resolveUrl } from "./hub/hub-client";
import { hubOptionsFromEnv, parseHubId, type HubOptions } from "./hub/hub-config";
import { isLocalPath, readModelFolder, unsupportedGraph } from "./model-folder";

export interface ModelDtypes {
  /** Dtypes with a graph file, in transformers.js' order. */
  dtypes: Dtype[];
  /** What `auto` resolves to (null: no graph at all). */
  auto: Dtype | null;
  /** Graph files of dtypes the engine cannot run, with why ("onnx/model_q1.onnx (q1: 1-bit …)"). */
  unsupported: string[];
}

/** Local folders are read; hub ids are listed (and their config.json fetched) on HF_ENDPOINT. */
export async function modelDtypes(id: string, hubOverrides: Partial<HubOptions> = {}): Promise<ModelDtypes> {
  let files: string[];
  let config: Record<string, unknown>;
  if (isLocalPath(id)) {
    const folder = readModelFolder(path.resolve(id), id);
    files = folder.onnxFiles;
    config = folder.config;
  } else {
    const hub = { ...hubOptionsFromEnv(), ...hubOverrides };
    const parsed = parseHubId(id);
    if (!parsed) throw loadError("not_found", `${id} is neither a model folder nor a hub id like org/name`);
    if (hub.offline) throw loadError("offline", `HF_HUB_OFFLINE is set: cannot list model ${id}`);
    files = (await listRepoFiles(hub, parsed.repo, parsed.revision)).map((f) => f.path);
    const res = await hubFetch(hub, resolveUrl(hub, parsed.repo, parsed.revision, "config.json"));
    if (!res.ok) {
      await res.body?.cancel();
      throw hubError(hub, res, parsed.repo, "config.json");
    }
    config = (await res.json()) as Record<string, unknown>;
  }
  const dtypes = availableDtypes(files);
  const jsConfig = (config["transformers.js_config"] ?? {}) as Record<string, unknown>;
  const unsupported = files.map(unsupportedGraph).filter((f) => f !== null);
  return { dtypes, auto: chooseAutoDtype(dtypes, jsConfig.dtype), unsupported };
}
