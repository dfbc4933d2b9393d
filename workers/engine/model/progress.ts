// Model loading progress, reported through loadModel's onProgress (the worker publishes it).
import type { Dtype } from "./dtypes";

export interface FileProgress {
  /** Path in the repository ("onnx/model_q4.onnx"). */
  file: string;
  done: number;
  total: number;
}

export type LoadProgress =
  /** Asking the hub which files the repository has. */
  | { state: "resolving"; id: string }
  /** Bytes of each file and overall (files already cached count as done). */
  | {
      state: "downloading";
      id: string;
      dtype: Dtype;
      file: FileProgress;
      files: FileProgress[];
      done: number;
      total: number;
    }
  /** Files in place; creating the session. */
  | { state: "loading"; dtype: Dtype }
  | { state: "ready"; dtype: Dtype };
