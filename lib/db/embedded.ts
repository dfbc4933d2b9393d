import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { servePglite } from "./embedded-server";
import { embeddedInfoFile } from "./url";

export type EmbeddedDb = { url: string; stop: () => Promise<void> };

/**
 * Starts PGlite with its files in `dir` (or in memory) and serves it over the Postgres
 * wire protocol on loopback, so every process talks to it with the same `postgres` driver
 * as to a real server (see embedded-server.ts for how clients share its one backend).
 */
export async function startEmbeddedDb(options: {
  dir?: string;
  port?: number;
  /** Written so the CLI and the app can find this server; removed on stop. */
  infoDir?: string;
}): Promise<EmbeddedDb> {
  if (options.dir) mkdirSync(path.dirname(options.dir), { recursive: true });
  const pg = await PGlite.create(options.dir ?? "memory://");
  const server = await servePglite(pg, { host: "127.0.0.1", port: options.port ?? 0 });
  const url = `postgres://postgres@${server.host}:${server.port}/postgres`;
  const infoFile = options.infoDir ? embeddedInfoFile(options.infoDir) : undefined;
  if (infoFile) writeFileSync(infoFile, JSON.stringify({ url, pid: process.pid }));
  let stopped = false;
  return {
    url,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      if (infoFile) rmSync(infoFile, { force: true });
      await server.close();
      await pg.close();
    },
  };
}
