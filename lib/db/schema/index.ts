export * from "./teams";
export * from "./api-keys";
export * from "./deployments";
export * from "./pipelines";
export * from "./datasets";
export * from "./workers";
