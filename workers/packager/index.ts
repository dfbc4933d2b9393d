export { startPackager, type PackagerOptions } from "./packager-loop";
export { packageDataset, type PackageOptions } from "./package-dataset";
export { PackagingError, LeaseLost } from "./errors";
