export { Engine, type EngineOptions, type GenerateOptions } from "./engine";
export { EngineError, isEngineError, type EngineErrorCode } from "./errors";
export { ModelRegistry, loadModel, type LoadedModel } from "./model-loader";
