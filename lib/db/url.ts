import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { env } from "../env";

/** Where the launcher writes the address of the embedded database while it runs. */
export function embeddedInfoFile(dataDir: string): string {
  return path.join(dataDir, "embedded-db.json");
}

export type EmbeddedInfo = { url: string; pid: number };

export function readEmbeddedInfo(dataDir: string): EmbeddedInfo | undefined {
  const file = embeddedInfoFile(dataDir);
  if (!existsSync(file)) return undefined;
  try {
    const info = JSON.parse(readFileSync(file, "utf8")) as EmbeddedInfo;
    process.kill(info.pid, 0); // throws when that process is gone
    return info;
  } catch {
    return undefined;
  }
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
