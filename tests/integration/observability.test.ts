import { describe, expect, inject, it } from "vitest";
import { UsageResponse } from "@/lib/contracts/usage";
import { createApiKey } from "@/lib/services/api-keys";
import { createDeployment } from "@/lib/services/deployments";
import { createTeam } from "@/lib/services/teams";
import { baseUrl, client, db, makeTeam } from "../helpers/context";
import { complete, makeDeployment, noEosBias } from "../helpers/deployments";
import { family, sample, scrape } from "../helpers/metrics";
import { ownWorld } from "../helpers/own-world";

describe("metrics", () => {
  it("serves the app's and the workers' metrics in Prometheus format, moving with traffic, routes as patterns", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    const dep = await makeDeployment(team);
    const before = (await scrape()).families;
    const added0 = Number(family(before, "lmp_samples_added_total")?.metrics[0]?.value ?? 0);

    const pipeline = (await api.post("/v1/pipelines/create", { name: "metered" })).json.id as string;
    for (let i = 0; i < 3; i++)
      await api.post(`/v1/pipelines/${pipeline}/add`, { messages: [{ role: "user", content: "m" }] });
    // End of text is banned: the random model could otherwise end before its third token.
    const done = await complete(dep, team.modelKey, {
      prompt: "Hello",
      max_tokens: 3,
      stream: true,
      logit_bias: await noEosBias(),
    });
    expect(done.status).toBe(200);

    // A stream is counted once its last event has gone out, a moment after the client read it.
    await expect
      .poll(async () => family((await scrape()).families, "lmp_generation_requests_total")?.metrics.length ?? 0)
      .toBeGreaterThan(0);
    const { status, families } = await scrape();
    expect(status).toBe(200);
    const requests = family(families, "http_requests_total")!;
    expect(requests.type).toBe("COUNTER");
    const adds = sample(requests, { route: "/v1/pipelines/[id]/add", method: "POST", status: "200" });
    expect(Number(adds?.value)).toBeGreaterThanOrEqual(3);
    // No label anywhere holds an id.
    for (const f of families)
      for (const m of f.metrics)
        for (const v of Object.values(m.labels ?? {}))
          expect(v, f.name).not.toMatch(/(pipe|smp|key|data)_[a-z0-9]{20}/);
    expect(family(families, "http_request_duration_seconds")?.type).toBe("HISTOGRAM");
    expect(Number(family(families, "lmp_samples_added_total")!.metrics[0]!.value)).toBeGreaterThanOrEqual(added0 + 3);

    const label = { deployment: `${team.slug}/${dep.name}` };
    expect(Number(sample(family(families, "lmp_generation_requests_total"), { ...label, status: "ok" })?.value)).toBe(
      1,
    );
    expect(Number(sample(family(families, "lmp_generated_tokens_total"), label)?.value)).toBe(3);
    expect(Number(sample(family(families, "lmp_prompt_tokens_total"), label)?.value)).toBeGreaterThan(0);
    expect(family(families, "lmp_time_to_first_token_seconds")?.type).toBe("HISTOGRAM");
    expect(Number(sample(family(families, "lmp_time_to_first_token_seconds_count"), label)?.value)).toBe(1);
    expect(
      family(families, "lmp_dataset_jobs")
        ?.metrics.map((m) => m.labels?.status)
        .sort(),
    ).toEqual(["FAILED", "PROCESSING", "READY"]);
    // The worker's own figures, labelled with its id, and the default process metrics.
    const queue = family(families, "lmp_engine_queue_depth")!;
    expect(queue.metrics[0]!.labels!.worker).toMatch(/^wrk_/);
    expect(family(families, "lmp_engine_running_sequences")).toBeDefined();
    expect(family(families, "lmp_kv_cache_bytes")).toBeDefined();
    expect(family(families, "lmp_prompt_cache_answers")?.metrics[0]?.labels?.worker).toMatch(/^wrk_/);
    // The prompt cache's room: its 64 MiB and, by default, the idle part of the KV budget (at
    // least 256 MiB, less what the batch's rows are planned to take): more than the 64 MiB alone.
    expect(Number(family(families, "lmp_prompt_cache_room_bytes")?.metrics[0]?.value)).toBeGreaterThan(192 * 2 ** 20);
    expect(family(families, "process_cpu_user_seconds_total")).toBeDefined();
    // When each process started (restart detection): the app's, and each worker's under its id.
    const started = family(families, "process_start_time_seconds")!.metrics;
    expect(started.some((s) => !s.labels?.worker)).toBe(true);
    expect(started.some((s) => /^wrk_/.test(s.labels?.worker ?? ""))).toBe(true);
  });
});

describe("a request whose client leaves before the answer", () => {
  it("is counted and logged as 499, not missed (a non-streamed completion that timed out)", async () => {
    const team = await makeTeam();
    const dep = await makeDeployment(team);
    const route = { route: "/v1/completions", method: "POST", status: "499" };
    const count = async () =>
      Number(sample(family((await scrape()).families, "http_requests_total"), route)?.value ?? 0);
    const before = await count();
    const leaving = new AbortController();
    const pending = fetch(`${baseUrl}/v1/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${team.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: `${team.slug}/${dep.name}`,
        prompt: "Once upon a time",
        max_tokens: 900,
        logit_bias: await noEosBias(),
      }),
      signal: leaving.signal,
    }).catch(() => null);
    // Gone long before 900 tokens (any stage before the answer counts: admission, the generation).
    await new Promise((r) => setTimeout(r, 100));
    leaving.abort();
    await pending;
    await expect.poll(count, { timeout: 10_000 }).toBe(before + 1);
  });
});

describe("a streamed /v1 completion", () => {
  it("is counted with its status (200), not as a client that left; query fields make no route label", async () => {
    const team = await makeTeam();
    const dep = await makeDeployment(team);
    const api = client(team.apiKey);
    const ok = { route: "/v1/completions", method: "POST", status: "200" };
    const left = { ...ok, status: "499" };
    const count = async (labels: Record<string, string>) =>
      Number(sample(family((await scrape()).families, "http_requests_total"), labels)?.value ?? 0);
    const [ok0, left0] = [await count(ok), await count(left)];
    const res = await fetch(`${baseUrl}/v1/completions?made=up`, {
      method: "POST",
      headers: { authorization: `Bearer ${team.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: `${team.slug}/${dep.name}`, prompt: "Hi", max_tokens: 2, stream: true }),
    });
    expect(res.status).toBe(200);
    await res.text();
    await expect.poll(() => count(ok), { timeout: 10_000 }).toBe(ok0 + 1);
    expect(await count(left)).toBe(left0); // before: every stream was a 499
    const pipeline = (await api.post("/v1/pipelines/create", { name: "labels" })).json.id as string;
    const added = await api.post(`/v1/pipelines/${pipeline}/add?made=${pipeline}`, {
      messages: [{ role: "user", content: "x" }],
    });
    expect(added.status).toBe(200);
    const routes = family((await scrape()).families, "http_requests_total")!.metrics.map((m) => m.labels?.route);
    expect(routes.filter((r) => r?.includes("[made]"))).toEqual([]); // before: /v1/pipelines/[made]/add
  });
});

describe("metrics behind a proxy on this machine", () => {
  it("refuses /metrics, and the models in /api/health, to what the proxy forwards", async () => {
    const proxied = { "x-forwarded-for": "203.0.113.9" };
    const metrics = await client().get("/metrics", proxied);
    expect(metrics.status).toBe(403);
    expect(metrics.json.error.type).toBe("forbidden");
    expect((await client().get("/metrics")).status).toBe(200); // this machine itself
    const health = await client().get("/api/health", proxied);
    expect(health.status).toBe(200);
    expect(JSON.stringify(health.json)).not.toContain("models");
    expect(JSON.stringify((await client().get("/api/health")).json)).toContain("models");
  });
});

describe("usage", () => {
  it("sums each completion's usage per day, key and deployment, for the team's own keys only", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    const [d1, d2] = [await makeDeployment(team), await makeDeployment(team)];
    const second = await createApiKey(db().db, { teamId: team.id, kind: "model" });
    const usages: { key: string; dep: string; prompt: number; completion: number }[] = [];
    const run = async (dep: typeof d1, key: string, keyId: string, stream: boolean) => {
      const r = await complete(dep, key, { prompt: "Once upon a time", max_tokens: 4, stream });
      expect(r.status).toBe(200);
      const u = stream
        ? JSON.parse(
            r.text
              .split("\n")
              .filter((l) => l.includes('"usage"'))
              .at(-1)!
              .replace(/^data: /, ""),
          ).usage
        : r.json.usage;
      usages.push({ key: keyId, dep: dep.id, prompt: u.prompt_tokens, completion: u.completion_tokens });
    };
    await run(d1, team.modelKey, "model", false);
    await run(d1, team.modelKey, "model", true);
    await run(d2, second.secret, second.key.id, false);
    const chat = await api.post("/v1/chat/completions", {
      model: d2.name,
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 3,
    });
    expect(chat.status).toBe(200);
    usages.push({
      key: team.keyId,
      dep: d2.id,
      prompt: chat.json.usage.prompt_tokens,
      completion: chat.json.usage.completion_tokens,
    });

    const sum = (xs: typeof usages) => ({
      requests: xs.length,
      prompt_tokens: xs.reduce((a, x) => a + x.prompt, 0),
      completion_tokens: xs.reduce((a, x) => a + x.completion, 0),
    });
    const today = new Date().toISOString().slice(0, 10);
    await expect
      .poll(async () => UsageResponse.parse((await api.get("/v1/usage?groupBy=day")).json).data, { timeout: 10_000 })
      .toEqual([{ day: today, ...sum(usages) }]);
    const byDeployment = UsageResponse.parse(
      (await api.get(`/v1/usage?groupBy=deployment&from=${today}&to=${today}`)).json,
    );
    expect(byDeployment.data).toEqual(
      [d1.id, d2.id].sort().map((id) => ({ deployment: id, ...sum(usages.filter((u) => u.dep === id)) })),
    );
    const byKey = UsageResponse.parse((await api.get("/v1/usage?groupBy=key")).json).data;
    expect(byKey.find((r) => r.key === second.key.id)).toEqual({
      key: second.key.id,
      ...sum(usages.filter((u) => u.key === second.key.id)),
    });
    expect(byKey.reduce((a, r) => a + r.requests, 0)).toBe(4);

    // Another team sees nothing of it; bad queries name their parameter.
    expect((await client((await makeTeam()).apiKey).get("/v1/usage")).json).toEqual({ data: [] });
    for (const [query, param] of [
      ["groupBy=week", "groupBy"],
      ["from=2026-13-01", "from"],
      [`from=${today}&to=2020-01-01`, "from"],
      ["bogus=1", "bogus"],
    ]) {
      const res = await api.get(`/v1/usage?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.json.error.param, query).toBe(param);
    }
  });
});

describe("logs and the metrics token", () => {
  it("logs one JSON line per request with its request id in the app and in the worker; the token guards /metrics", async () => {
    // A world of its own (database, app, worker), so this worker is the one that serves.
    const world = await ownWorld("logs", { app: { METRICS_TOKEN: "metrics-token-0123456789", LOG_LEVEL: "info" } });
    const { app, worker, handle } = world;
    try {
      const team = await createTeam(handle.db, { slug: "logged" });
      const modelKey = (await createApiKey(handle.db, { teamId: team.id, kind: "model" })).secret;
      await createDeployment(handle.db, { teamId: team.id, name: "tiny", model: inject("tinyModel") });
      const res = await fetch(`${app.url}/deployments/logged/tiny`, {
        method: "POST",
        headers: { authorization: `Bearer ${modelKey}`, "content-type": "application/json" },
        body: JSON.stringify({ prompt: "Hi", max_tokens: 2 }),
      });
      expect(res.status).toBe(200);
      const reqId = res.headers.get("x-request-id")!;
      const lines = (logs: string[]) =>
        logs
          .join("")
          .split("\n")
          .filter((l) => l.startsWith("{"))
          .map((l) => JSON.parse(l) as Record<string, unknown>);
      await expect
        .poll(() => lines(app.logs).find((l) => l.reqId === reqId), { timeout: 5_000 })
        .toMatchObject({
          proc: "app",
          route: "/deployments/[team]/[name]",
          method: "POST",
          status: 200,
          teamId: team.id,
        });
      await expect
        .poll(() => lines(worker.logs).find((l) => l.reqId === reqId), { timeout: 5_000 })
        .toMatchObject({ proc: "worker", route: "/generate", method: "POST", status: 200 });
      for (const l of [...lines(app.logs), ...lines(worker.logs)]) {
        expect(JSON.stringify(l)).not.toContain(modelKey);
        expect(JSON.stringify(l)).not.toContain('"Hi"');
      }
      expect((await scrape(app.url)).status).toBe(401);
      expect((await scrape(app.url, { authorization: "Bearer wrong-token-0123456789" })).status).toBe(401);
      expect((await scrape(app.url, { authorization: "Bearer metrics-token-0123456789" })).status).toBe(200);
      // The health check counts the workers for anyone, and names the models they serve (deployed
      // model ids) only to whoever may scrape: here, with the token, even from this machine.
      const health = async (headers: Record<string, string> = {}) => {
        const res = await fetch(`${app.url}/api/health`, { headers });
        expect(res.status).toBe(200);
        return (await res.json()) as { status: string; workers: { live: number; models?: string[] } };
      };
      const open = await health();
      expect(open).toMatchObject({ status: "ok", workers: { live: 1 } });
      expect(open.workers).not.toHaveProperty("models");
      expect(JSON.stringify(open)).not.toContain("tiny");
      expect((await health({ authorization: "Bearer wrong-token-0123456789" })).workers).not.toHaveProperty("models");
      const operator = await health({ authorization: "Bearer metrics-token-0123456789" });
      expect(operator.workers.models?.some((m) => m.startsWith(`${inject("tinyModel")}#`))).toBe(true);
      expect((await fetch(`${app.url}/api/health`, { method: "POST" })).status).toBe(405);
    } finally {
      await world.close();
    }
  }, 120_000);
});
