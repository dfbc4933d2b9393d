// Whether the embedded server's user can run its binaries: as root the server runs as another
// user, which a project cloned into a private folder (mode 0700) shuts out.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { unreachableFolder, type RunAs } from "./embedded";

const root = process.getuid?.() === 0;
// As root: ask as `nobody`, as the server's user would be asked. Otherwise: as this process.
const asUser: RunAs = root ? { uid: 65534, gid: 65534, name: "nobody" } : undefined;
let top: string;
afterEach(() => {
  chmodSync(top, 0o700);
  rmSync(top, { recursive: true, force: true });
});

describe("unreachableFolder", () => {
  it("names the first folder the user may not enter, the file when it is not executable, else null", () => {
    top = mkdtempSync(path.join(os.tmpdir(), "lmp-reach-"));
    const bin = path.join(top, "node_modules", "native", "bin");
    mkdirSync(bin, { recursive: true, mode: 0o755 });
    const file = path.join(bin, "postgres");
    writeFileSync(file, "#!/bin/sh\n", { mode: 0o755 });

    chmodSync(top, root ? 0o700 : 0o000); // private to its owner (root), or to no one
    expect(unreachableFolder(file, asUser)).toBe(top);
    chmodSync(top, 0o711);
    expect(unreachableFolder(file, asUser)).toBeNull();
    chmodSync(file, 0o644);
    expect(unreachableFolder(file, asUser)).toBe(file);
  });
});
