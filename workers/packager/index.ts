export { startPackager, type PackagerOptions } from "./packager-loop";
export { packageDataset, PackagingError, LeaseLost, type PackageOptions } from "./package-dataset";
