import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

let fullCollection: (() => void) | undefined;

/**
 * A full, non-incremental collection, with the `gc` function `--expose-gc` gives a new context
 * (the flag is set at run time, so no process needs to start with it).
 */
export function collectGarbage(): void {
  if (!fullCollection) {
    setFlagsFromString("--expose-gc");
    fullCollection = runInNewContext("gc") as () => void;
  }
  fullCollection();
}
