// Routing over the workers table: a worker that dies is skipped (its heartbeat is still fresh,
// so only the failed connection tells), and a worker that dies mid-stream ends the stream with
// an error event instead of a silent, truncated success.
import type { ChildProcess } from "node:child_process";
import { eq, sql } from "drizzle-orm";
import { afterAll, describe, expect, inject, it } from "vitest";
import { workers } from "@/lib/db/schema";
import { InferenceClient } from "@/lib/inference/client";
import { workerSecret } from "@/lib/internal-secret";
import { db } from "../helpers/context";
import { complete, makeTeamWithDeployment, noEosBias, parseSse } from "../helpers/deployments";
import { startWorker } from "../setup/global-setup";

const extra: ChildProcess[] = [];

async function spareWorker() {
  const w = await startWorker({
    DATABASE_URL: inject("databaseUrl"),
    AUTH_SECRET: inject("authSecret"),
    DATA_DIR: inject("dataDir"),
    WORKER_MODELS: inject("tinyModel"),
    WORKER_HEARTBEAT_SECONDS: "1",
  });
  extra.push(w.child);
  // A worker registers before its models are loaded: wait until it advertises one as ready.
  await expect
    .poll(
      async () => (await db().db.select().from(workers).where(eq(workers.pid, w.child.pid!)))[0]?.models.length ?? 0,
      { timeout: 30_000, interval: 200 },
    )
    .toBeGreaterThan(0);
  // The app reads the registry at most once a second: let it see the new worker.
  await new Promise((r) => setTimeout(r, 1_100));
  const [row] = await db().db.select().from(workers).where(eq(workers.pid, w.child.pid!));
  return { child: w.child, row: row!, client: new InferenceClient({ url: row!.address!, secret: workerSecret() }) };
}

async function kill(child: ChildProcess) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGKILL");
  await exited;
}

afterAll(async () => {
  for (const child of extra) await kill(child);
  // Killed workers never deregister: drop their rows so later tests see only the suite's worker.
  const pids = extra.map((c) => c.pid!).filter(Boolean);
  if (pids.length)
    await db()
      .db.delete(workers)
      .where(sql`${workers.pid} in ${pids}`);
});

describe("worker failover", () => {
  it("requests keep succeeding when a live-looking worker has been killed", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const spare = await spareWorker();
    // Both workers take requests in turn.
    await expect.poll(async () => (await db().db.select().from(workers)).length, { timeout: 5_000 }).toBe(2);
    await kill(spare.child);
    // Its row still looks live to the app (heartbeat younger than three intervals).
    const [row] = await db()
      .db.select({ fresh: sql<boolean>`${workers.heartbeatAt} > now() - interval '10 seconds'` })
      .from(workers)
      .where(eq(workers.id, spare.row.id));
    expect(row!.fresh).toBe(true);
    for (let i = 0; i < 6; i++) {
      const res = await complete(dep, team.modelKey, { prompt: "Hello", max_tokens: 3, seed: i });
      expect(res.status, res.text).toBe(200);
    }
  });

  /** Opens streams until one runs on `spare`, kills it, and returns the rest of that stream. */
  async function killMidStream(
    spare: Awaited<ReturnType<typeof spareWorker>>,
    open: (signal: AbortSignal) => Promise<Response>,
  ) {
    // Round robin: within a few streams one lands on the spare worker.
    for (let attempt = 0; attempt < 8; attempt++) {
      const controller = new AbortController();
      const res = await open(controller.signal);
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      await reader.read();
      const load = (await spare.client.health()).load ?? [];
      if (!load.some((l) => Number(l.running) > 0)) {
        controller.abort();
        continue;
      }
      await kill(spare.child);
      let text = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return parseSse(text);
        text += new TextDecoder().decode(value);
      }
    }
    throw new Error("no stream landed on the spare worker");
  }

  /**
   * killMidStream with a new spare worker until the kill cuts the stream: on a loaded machine the
   * worker can finish its 1,000 tokens (about a second on the tiny model) before the kill takes
   * effect, and a stream that ran to its end says nothing about a worker dying mid-stream.
   */
  async function cutStream(
    open: (signal: AbortSignal) => Promise<Response>,
    ranToEnd: (events: ReturnType<typeof parseSse>) => boolean,
  ) {
    for (let attempt = 0; attempt < 3; attempt++) {
      const events = await killMidStream(await spareWorker(), open);
      if (!ranToEnd(events)) return events;
    }
    throw new Error("three streams ran to their end before their worker was killed");
  }

  const long = { prompt: "The city was quiet", max_tokens: 1000, temperature: 0 };

  it("a worker that dies mid-stream ends a POST stream with an error event, without [DONE]", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const events = await cutStream(
      (signal) =>
        fetch(dep.url, {
          method: "POST",
          headers: { authorization: `Bearer ${team.modelKey}`, "content-type": "application/json" },
          body: JSON.stringify({ ...long, stream: true }),
          signal,
        }),
      (events) => events.at(-1)?.data === "[DONE]",
    );
    expect(events.at(-1)!.data).not.toBe("[DONE]");
    expect(JSON.parse(events.at(-1)!.data)).toEqual({ error: { type: "internal", message: expect.any(String) } });
  });

  it("a worker that dies mid-stream ends a GET stream with an error event, then end", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const query = new URLSearchParams({
      prompt: long.prompt,
      max_tokens: "1000",
      temperature: "0",
      authorization: team.modelKey,
    });
    const events = await cutStream(
      (signal) => fetch(`${dep.url}?${query}`, { signal }),
      (events) => events.at(-1)?.event === "end" && JSON.parse(events.at(-1)!.data).finish_reason !== "error",
    );
    expect(events.slice(-2).map((e) => e.event)).toEqual(["error", "end"]);
    expect(JSON.parse(events.at(-2)!.data)).toEqual({ error: { type: "internal", message: expect.any(String) } });
    expect(JSON.parse(events.at(-1)!.data)).toEqual({ finish_reason: "error", stop: null, usage: null });
  });
  it("a worker that dies under a non-streamed generation: another worker answers it, the client sees a 200", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const body = { ...long, logit_bias: await noEosBias() };
    const alone = await complete(dep, team.modelKey, body); // what it answers, whichever worker runs it
    expect(alone.status).toBe(200);
    for (let attempt = 0; attempt < 8; attempt++) {
      const spare = await spareWorker();
      const pending = complete(dep, team.modelKey, body);
      // Round robin: within a few requests one lands on the spare worker.
      let landed = false;
      for (let i = 0; i < 20 && !landed; i++) {
        landed = ((await spare.client.health()).load ?? []).some((l) => Number(l.running) > 0);
        if (!landed) await new Promise((r) => setTimeout(r, 25));
      }
      if (landed) await kill(spare.child);
      const res = await pending;
      expect(res.status, res.text).toBe(200);
      if (!landed) {
        await kill(spare.child);
        continue;
      }
      // Before, a 500 "the worker closed the connection before it finished".
      expect(res.json.result[0].completion).toBe(alone.json.result[0].completion);
      return;
    }
    throw new Error("no request landed on a spare worker");
  });
});
