import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { env } from "../env";
import { alive } from "../pid-lock";

/** Where the launcher writes the address of the embedded database while it runs. */
export function embeddedInfoFile(dataDir: string): string {
  return path.join(dataDir, "embedded-db.json");
}

export type EmbeddedInfo = { url: string; pid: number; serverPid?: number };

/** The command line of a process (Linux); undefined elsewhere or when it is gone. */
export const cmdline = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  } catch {
    return undefined;
  }
};

/**
 * The embedded database a running launcher (or CLI) announced for `dataDir`, or undefined when
 * none runs. A file left by one that was killed does not count: its launcher's pid must be
 * alive and not this process's, and its server's a live postgres. After a container restarts,
 * pids start again from 1 and the new launcher often gets the very pid the file names.
 */
export function readEmbeddedInfo(dataDir: string): EmbeddedInfo | undefined {
  const file = embeddedInfoFile(dataDir);
  if (!existsSync(file)) return undefined;
  let info: EmbeddedInfo;
  try {
    info = JSON.parse(readFileSync(file, "utf8")) as EmbeddedInfo;
  } catch {
    return undefined;
  }
  if (!Number.isInteger(info.pid) || info.pid === process.pid || !alive(info.pid)) return undefined;
  if (info.serverPid !== undefined) {
    if (!alive(info.serverPid)) return undefined;
    const cmd = cmdline(info.serverPid);
    if (cmd && path.basename(cmd[0] ?? "") !== "postgres") return undefined;
  }
  return info;
}

/**
 * DATABASE_URL when set; otherwise the embedded database that `npm start` (or the CLI)
 * is serving for DATA_DIR.
 */
export function resolveDatabaseUrl(): string {
  const e = env();
  if (e.DATABASE_URL) return e.DATABASE_URL;
  const info = readEmbeddedInfo(e.DATA_DIR);
  if (info) return info.url;
  throw new Error(
    `DATABASE_URL is not set and no embedded database is running for DATA_DIR=${e.DATA_DIR}. ` +
      "Start the product with `npm start`, or set DATABASE_URL.",
  );
}
