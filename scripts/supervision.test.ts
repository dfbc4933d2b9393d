import { readFileSync, rmSync } from "node:fs";
import path from "node:path";
import postgres from "postgres";
import { afterAll, describe, expect, it, onTestFailed } from "vitest";
import { freePort } from "@/lib/net/free-port";
import { alive, embeddedUrl, freshDataDir, launch, stop } from "./testing/launch";

/**
 * A sick worker must not take the service down: the launcher restarts a crashed worker while the
 * app keeps serving, a frozen worker costs a request a bounded wait, and killing the launcher
 * leaves no process behind.
 */
const dataDir = freshDataDir("supervision");
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

type Banner = { base: string; apiKey: string; modelKey: string; deployment: string };
/** The first run's keys, as kept in DATA_DIR/first-run.txt. */
const banner = (port: number): Banner => {
  const firstRun = readFileSync(path.join(dataDir, "first-run.txt"), "utf8");
  return {
    base: `http://127.0.0.1:${port}`,
    apiKey: /API key:\s+(lmp_sk_\S+)/.exec(firstRun)![1]!,
    modelKey: /Model key:\s+(lmp_mk_\S+)/.exec(firstRun)![1]!,
    deployment: `http://127.0.0.1:${port}/deployments/demo/demo`,
  };
};

const complete = (b: Banner, signal?: AbortSignal) =>
  fetch(b.deployment, {
    method: "POST",
    headers: { authorization: `Bearer ${b.modelKey}`, "content-type": "application/json" },
    body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 4 }),
    signal,
  });

const addSample = async (b: Banner, pipelineId: string) =>
  fetch(`${b.base}/v1/pipelines/${pipelineId}/add`, {
    method: "POST",
    headers: { authorization: `Bearer ${b.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "still here" }] }),
  });

async function workerPid(): Promise<number> {
  const sql = postgres(embeddedUrl(dataDir), { max: 1, onnotice: () => {} });
  try {
    for (let i = 0; i < 200; i++) {
      const rows = await sql<
        { pid: number }[]
      >`select pid from workers where address is not null order by started_at desc`;
      if (rows[0] && alive(rows[0].pid)) return rows[0].pid;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error("no live worker registered");
  } finally {
    await sql.end();
  }
}

describe("supervision", () => {
  it("restarts a killed worker while ingest keeps working, and bounds the wait on a frozen one", async () => {
    const port = await freePort();
    const l = await launch(dataDir, port, { WORKER_HEARTBEAT_SECONDS: "1", WORKER_RESPONSE_TIMEOUT_MS: "3000" });
    onTestFailed(() => console.log(l.output()));
    try {
      const b = banner(port);
      expect((await complete(b)).status).toBe(200);
      const created = await fetch(`${b.base}/v1/pipelines/create`, {
        method: "POST",
        headers: { authorization: `Bearer ${b.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ name: "during outages" }),
      });
      const pipelineId = ((await created.json()) as { id: string }).id;

      // kill -9: the app keeps serving ingest at once, and inference comes back by itself.
      const first = await workerPid();
      process.kill(first, "SIGKILL");
      expect((await addSample(b, pipelineId)).status).toBe(200);
      const killedAt = Date.now();
      await expect.poll(async () => (await complete(b)).status, { timeout: 30_000, interval: 250 }).toBe(200);
      expect(Date.now() - killedAt).toBeLessThan(30_000);
      expect(l.output()).toMatch(/\[start\] worker exited \(SIGKILL\); restarting/);
      expect(l.child.exitCode).toBeNull();

      // SIGSTOP: a request gets an error body within the response timeout (3 s here), not a hang.
      const frozen = await workerPid();
      expect(frozen).not.toBe(first);
      process.kill(frozen, "SIGSTOP");
      try {
        const t0 = Date.now();
        const res = await complete(b, AbortSignal.timeout(20_000));
        expect(res.status).toBeGreaterThanOrEqual(500);
        expect(((await res.json()) as { error: { type: string } }).error.type).toBe("internal");
        expect(Date.now() - t0).toBeLessThan(10_000);
        expect((await addSample(b, pipelineId)).status).toBe(200);
      } finally {
        process.kill(frozen, "SIGCONT");
      }
      await expect.poll(async () => (await complete(b)).status, { timeout: 30_000, interval: 250 }).toBe(200);
    } finally {
      expect(await stop(l)).toBe(0);
    }
  }, 120_000);

  it("leaves no process behind when the launcher is killed with -9, and the next start works", async () => {
    const port = await freePort();
    const l = await launch(dataDir, port);
    const worker = await workerPid();
    const { serverPid } = JSON.parse(readFileSync(path.join(dataDir, "embedded-db.json"), "utf8")) as {
      serverPid: number;
    };
    l.child.kill("SIGKILL");
    // The app and the worker see their IPC channel close and exit.
    await expect.poll(() => alive(worker), { timeout: 20_000 }).toBe(false);
    await expect
      .poll(
        () =>
          fetch(`http://127.0.0.1:${port}/api/health/live`).then(
            () => "up",
            () => "down",
          ),
        {
          timeout: 20_000,
        },
      )
      .toBe("down");
    // The database server, in a process group of its own, is still up: the next start stops it first.
    const again = await launch(dataDir, port);
    try {
      expect(alive(serverPid)).toBe(false);
      const res = await complete(banner(port));
      expect(res.status, `${await res.clone().text()}\n${again.output()}`).toBe(200);
    } finally {
      expect(await stop(again)).toBe(0);
    }
  }, 120_000);
});
