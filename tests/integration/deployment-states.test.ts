import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { DeploymentDto } from "@/lib/contracts/deployments";
import type { DbHandle } from "@/lib/db/client";
import { workers } from "@/lib/db/schema";
import { InferenceClient } from "@/lib/inference/client";
import { createApiKey } from "@/lib/services/api-keys";
import { createDeployment, deleteDeployment } from "@/lib/services/deployments";
import { createTeam } from "@/lib/services/teams";
import { startHubServer } from "@/workers/engine/testing/hub-server";
import { llamaLayoutDir } from "@/workers/engine/testing/models";
import { ownWorld, type OwnWorld } from "../helpers/own-world";

/**
 * Deployments of hub ids, end to end: an app and a worker of their own on a scratch database, and
 * a local stand-in for the hub (tests have no network). The deployment's state goes downloading
 * (with bytes) → ready; meanwhile its requests get 503 with Retry-After, never a hang; a model the
 * hub lacks, or a dtype the repository lacks, fails with the reason.
 */
let world: OwnWorld;
let hub: Awaited<ReturnType<typeof startHubServer>>;
let handle: DbHandle;
let base: string;
let apiKey: string;
let modelKey: string;
let teamId: string;
let teamSlug: string;

beforeAll(async () => {
  hub = await startHubServer({ repos: { "acme/tiny": inject("tinyModel"), "beta/tiny": inject("tinyModel") } });
  // This worker serves team "states" only (its own machine), and not its beta/* models.
  world = await ownWorld("states", { worker: { HF_ENDPOINT: hub.url, WORKER_SERVES: "team:states,!beta/*" } });
  handle = world.handle;
  base = world.app.url;
  const team = await createTeam(handle.db, { slug: "states" });
  teamId = team.id;
  teamSlug = team.slug;
  apiKey = (await createApiKey(handle.db, { teamId, kind: "api" })).secret;
  modelKey = (await createApiKey(handle.db, { teamId, kind: "model" })).secret;
}, 120_000);

afterAll(async () => {
  await world?.close();
  await hub?.close();
});

const state = async (name: string) => {
  const res = await fetch(`${base}/v1/deployments/${name}`, { headers: { authorization: `Bearer ${apiKey}` } });
  expect(res.status).toBe(200);
  return DeploymentDto.parse(await res.json());
};
const complete = (name: string) =>
  fetch(`${base}/deployments/${teamSlug}/${name}`, {
    method: "POST",
    headers: { authorization: `Bearer ${modelKey}`, "content-type": "application/json" },
    body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 3 }),
  });

describe("deployment states", () => {
  it("downloads a hub model with progress, answers 503 with Retry-After meanwhile, then serves it", async () => {
    // The graph arrives slowly: its first kilobyte, then the rest two seconds later.
    hub.fault({ file: "onnx/model.onnx", after: 1024, kind: "slow", times: 1 });
    await createDeployment(handle.db, { teamId, name: "from-hub", model: "acme/tiny", dtype: "fp32" });

    let seen: DeploymentDto["status"] | undefined;
    await expect
      .poll(async () => (seen = (await state("from-hub")).status).state, { timeout: 20_000, interval: 50 })
      .toBe("downloading");
    expect(seen!.progress!.done).toBeLessThan(seen!.progress!.total);
    expect(seen!.progress!.percent).toBeLessThan(100);

    const t0 = Date.now();
    const busy = await complete("from-hub");
    expect(Date.now() - t0).toBeLessThan(3_000);
    expect(busy.status).toBe(503);
    expect(busy.headers.get("retry-after")).toBe("10");
    expect(((await busy.json()) as { error: { message: string } }).error.message).toMatch(/still downloading \(\d+%/);

    await expect.poll(async () => (await state("from-hub")).status.state, { timeout: 30_000 }).toBe("ready");
    expect((await state("from-hub")).status).toMatchObject({ dtype: "fp32", progress: null, message: null });
    const served = await complete("from-hub");
    expect(served.status).toBe(200);
  }, 60_000);

  it("fails an unknown hub id, and a dtype the repository lacks, with the reason", async () => {
    await createDeployment(handle.db, { teamId, name: "unknown", model: "acme/nothing-here" });
    await createDeployment(handle.db, { teamId, name: "no-q4", model: "acme/tiny", dtype: "q4" });
    await expect.poll(async () => (await state("unknown")).status.state, { timeout: 20_000 }).toBe("failed");
    expect((await state("unknown")).status).toMatchObject({ reason: "not_found" });
    expect((await state("unknown")).status.message).toContain("acme/nothing-here");
    await expect.poll(async () => (await state("no-q4")).status.state, { timeout: 20_000 }).toBe("failed");
    const noQ4 = (await state("no-q4")).status;
    expect(noQ4.reason).toBe("missing_dtype");
    expect(noQ4.message).toMatch(/q4/);
    expect(noQ4.message).toMatch(/fp32/); // the dtypes the repository does have

    const res = await complete("no-q4");
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("60"); // when the worker tries the load again
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/could not be loaded/);
  }, 60_000);

  it("unloads the model of a deleted deployment once its running stream has finished", async () => {
    await createDeployment(handle.db, { teamId, name: "short-lived", model: inject("tinyModel"), dtype: "fp32" });
    await expect.poll(async () => (await state("short-lived")).status.state, { timeout: 20_000 }).toBe("ready");
    const res = await fetch(`${base}/deployments/${teamSlug}/short-lived`, {
      method: "POST",
      headers: { authorization: `Bearer ${modelKey}`, "content-type": "application/json" },
      body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 48, stream: true }),
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let body = new TextDecoder().decode((await reader.read()).value);
    await deleteDeployment(handle.db, { teamId, name: "short-lived" });
    // The worker learns of it within a heartbeat; the stream it is serving still ends normally.
    for (let r = await reader.read(); !r.done; r = await reader.read()) body += new TextDecoder().decode(r.value);
    expect(body.trimEnd().endsWith("data: [DONE]")).toBe(true);
    const unloaded = `[worker] ${inject("tinyModel")} (fp32) unloaded: no longer deployed`;
    await expect.poll(() => world.worker.logs.some((l) => l.includes(unloaded)), { timeout: 10_000 }).toBe(true);
    // The other deployments' models stay.
    expect(world.worker.logs.some((l) => l.includes("acme/tiny (fp32) unloaded"))).toBe(false);
    expect((await complete("from-hub")).status).toBe(200);
  }, 60_000);

  it("lists the team's deployments with model, dtype and state", async () => {
    const res = await fetch(`${base}/v1/deployments/list`, { headers: { authorization: `Bearer ${apiKey}` } });
    const list = DeploymentDto.array().parse(await res.json());
    expect(list.map((d) => [d.name, d.dtype])).toEqual([
      ["from-hub", "fp32"],
      ["no-q4", "q4"],
      ["unknown", "auto"],
    ]);
    expect(list.find((d) => d.name === "from-hub")!.status.state).toBe("ready");
  });

  it("says how a ready model is served below the engine's best, and why", async () => {
    // A graph without position_ids: only requests at equal lengths can share a pass.
    const model = await llamaLayoutDir("no-position-ids");
    await createDeployment(handle.db, { teamId, name: "no-positions", model, dtype: "fp32" });
    await expect.poll(async () => (await state("no-positions")).status.state, { timeout: 30_000 }).toBe("ready");
    const note = "Only concurrent requests at equal lengths share a pass: the graph takes no position_ids.";
    expect((await state("no-positions")).status).toMatchObject({ state: "ready", message: note });
    expect(world.worker.logs.some((l) => l.includes(`[worker] ${model} (fp32, exact-length) ready; ${note}`))).toBe(
      true,
    );
    // A model served at its best says nothing.
    expect((await state("from-hub")).status.message).toBeNull();
  }, 60_000);

  it("says so, and answers 503 at once, when no live worker is set to serve the model (WORKER_SERVES)", async () => {
    await createDeployment(handle.db, { teamId, name: "unplaced", model: "beta/tiny", dtype: "fp32" });
    await expect.poll(async () => (await state("unplaced")).status.reason, { timeout: 10_000 }).toBe("excluded");
    const status = (await state("unplaced")).status;
    expect(status.state).toBe("pending");
    expect(status.message).toMatch(/No running worker serves this deployment's model \(beta\/tiny\).*WORKER_SERVES/);
    const t0 = Date.now();
    const res = await complete("unplaced");
    expect(Date.now() - t0).toBeLessThan(2_000); // no wait for a worker that will never load it
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/WORKER_SERVES/);
    expect(
      world.worker.logs.some((l) => l.includes("[worker] beta/tiny (fp32) for team states left to other workers")),
    ).toBe(true);
    expect(hub.requests.some((r) => r.path.includes("beta/tiny"))).toBe(false); // nothing downloaded
    expect((await complete("from-hub")).status).toBe(200); // the models it does serve are unaffected
  }, 30_000);

  it("routes a team's requests only to the workers placed for it, the same model of another team answering 503", async () => {
    // Team outsider deploys the very model and dtype team states serves here (from-hub).
    const outsider = await createTeam(handle.db, { slug: "outsider" });
    const outsiderKey = (await createApiKey(handle.db, { teamId: outsider.id, kind: "model" })).secret;
    await createDeployment(handle.db, { teamId: outsider.id, name: "same-model", model: "acme/tiny", dtype: "fp32" });
    const outsiderApi = (await createApiKey(handle.db, { teamId: outsider.id, kind: "api" })).secret;
    const outsiderState = async () => {
      const res = await fetch(`${base}/v1/deployments/same-model`, {
        headers: { authorization: `Bearer ${outsiderApi}` },
      });
      return DeploymentDto.parse(await res.json()).status;
    };
    await expect.poll(async () => (await outsiderState()).reason, { timeout: 10_000 }).toBe("excluded");
    expect((await outsiderState()).message).toMatch(/No running worker serves this deployment's model \(acme\/tiny\)/);
    const t0 = Date.now();
    const res = await fetch(`${base}/deployments/outsider/same-model`, {
      method: "POST",
      headers: { authorization: `Bearer ${outsiderKey}`, "content-type": "application/json" },
      body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 3 }),
    });
    expect(Date.now() - t0).toBeLessThan(2_000);
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/WORKER_SERVES/);
    expect(world.worker.logs.some((l) => l.includes("acme/tiny (fp32) for team outsider left to other workers"))).toBe(
      true,
    );
    // The health check lists the models without the teams they are placed for.
    const health = (await (await fetch(`${base}/api/health`)).json()) as { workers: { models: string[] } };
    expect(health.workers.models).toContain("acme/tiny#fp32");
    expect(health.workers.models.join(" ")).not.toContain("team:");
    // Team states' deployment of the same model is served as before, by the same worker.
    expect((await state("from-hub")).status.state).toBe("ready");
    expect((await complete("from-hub")).status).toBe(200);
    // The worker itself turns away outsider's request, should an app whose view of the workers
    // is out of date send it there: a 404 on `model`, on which the app tries other workers.
    const [row] = await handle.db.select().from(workers);
    // lib/internal-secret.ts's derivation, from the AUTH_SECRET this world's processes share.
    const internalSecret = createHmac("sha256", inject("authSecret")).update("worker-internal:v1").digest("base64url");
    const direct = new InferenceClient({ url: row!.address!, secret: internalSecret });
    const ask = { model: "acme/tiny", dtype: "fp32" as const, prompt: "Once upon a time", max_tokens: 2 };
    await expect(direct.generate({ ...ask, tenant: outsider.id })).rejects.toMatchObject({
      status: 404,
      param: "model",
    });
    await expect(direct.generate(ask)).rejects.toMatchObject({ status: 404, param: "model" }); // no team: none of its
    expect((await direct.generate({ ...ask, tenant: teamId })).choices).toHaveLength(1);
  }, 30_000);
});
