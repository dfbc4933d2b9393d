import { createServer, type Server, type Socket } from "node:net";
import type { PGlite } from "@electric-sql/pglite";

/**
 * Serves one PGlite instance to many Postgres-protocol clients.
 *
 * PGlite is a single backend. Why not @electric-sql/pglite-socket's multiplexer: it
 * interleaves clients message by message, so one client's Bind can land on another's
 * unnamed prepared statement ("bind message supplies 1 parameters, but prepared statement
 * requires 3"). Here a client holds the backend from its first message until its Sync or
 * simple Query has run *and* no transaction is open; everything else waits its turn (FIFO).
 * A client that disconnects while holding it has its transaction rolled back.
 */
const SSL_REQUEST = 80877103;
const CANCEL_REQUEST = 80877102;
const GSS_REQUEST = 80877104;

class FifoLock {
  private held = false;
  private waiters: (() => void)[] = [];
  acquire(): Promise<() => void> {
    return new Promise((resolve) => {
      const grant = () => {
        this.held = true;
        let released = false;
        resolve(() => {
          if (released) return;
          released = true;
          const next = this.waiters.shift();
          if (next) next();
          else this.held = false;
        });
      };
      if (this.held) this.waiters.push(grant);
      else grant();
    });
  }
}

export type PgliteServer = { host: string; port: number; close: () => Promise<void> };

export async function servePglite(db: PGlite, options: { host?: string; port?: number } = {}): Promise<PgliteServer> {
  await db.waitReady;
  const lock = new FifoLock();
  const sockets = new Set<Socket>();

  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.setNoDelay(true);
    let buffer: Buffer = Buffer.alloc(0);
    let started = false;
    let release: (() => void) | undefined;
    let chain: Promise<void> = Promise.resolve();

    const run = async (message: Buffer, endsGroup: boolean) => {
      release ??= await lock.acquire();
      await db.execProtocolRawStream(new Uint8Array(message), {
        onRawData: (data) => {
          if (!socket.destroyed) socket.write(data);
        },
      });
      if (endsGroup && !db.isInTransaction()) {
        release();
        release = undefined;
      }
    };

    const drain = async () => {
      for (;;) {
        if (!started) {
          if (buffer.length < 8) return;
          const length = buffer.readInt32BE(0);
          const code = buffer.readInt32BE(4);
          if (code === SSL_REQUEST || code === GSS_REQUEST) {
            socket.write("N");
            buffer = buffer.subarray(8);
            continue;
          }
          if (code === CANCEL_REQUEST) {
            socket.end();
            return;
          }
          if (buffer.length < length) return;
          const startup = buffer.subarray(0, length);
          buffer = buffer.subarray(length);
          await run(startup, true);
          started = true;
          continue;
        }
        if (buffer.length < 5) return;
        const length = 1 + buffer.readInt32BE(1);
        if (buffer.length < length) return;
        const message = buffer.subarray(0, length);
        buffer = buffer.subarray(length);
        const type = String.fromCharCode(message[0]!);
        if (type === "X") {
          socket.end();
          return;
        }
        await run(message, type === "S" || type === "Q");
      }
    };

    socket.on("data", (chunk: Buffer) => {
      buffer = buffer.length ? Buffer.concat([buffer, chunk]) : chunk;
      chain = chain.then(drain).catch((err: unknown) => {
        console.error("[embedded-db] connection error", err);
        socket.destroy();
      });
    });
    socket.on("error", () => socket.destroy());
    socket.on("close", () => {
      sockets.delete(socket);
      chain = chain.then(async () => {
        if (!release) return;
        try {
          if (db.isInTransaction()) await db.exec("ROLLBACK");
        } finally {
          release();
          release = undefined;
        }
      });
    });
  });

  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const { port } = server.address() as { port: number };
  return {
    host,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
