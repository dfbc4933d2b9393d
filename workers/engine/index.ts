export { Engine, type EngineOptions, type GenerateOptions } from "./engine";
export { EngineError, isEngineError, type EngineErrorCode, type ModelLoadFailure } from "./errors";
export { DTYPES, isDtypeChoice, type Dtype, type DtypeChoice } from "./model/dtypes";
export { hubOptionsFromEnv, type HubOptions } from "./model/hub/hub-config";
export { LAYOUTS } from "./model/layouts";
export { loadModel, loadTokenizer, type LoadedModel, type LoadModelOptions, type ModelInfo } from "./model/load-model";
export { modelDtypes, type ModelDtypes } from "./model/model-dtypes";
export type { FileProgress, LoadProgress } from "./model/progress";
export { ModelRegistry } from "./model/registry";
