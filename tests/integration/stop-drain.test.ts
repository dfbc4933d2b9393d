// A stopped app writes what it still holds in memory before it exits (lib/observe/stop-drain.ts):
// the usage counts, summed here for 10 minutes, and the captured samples. A world of its own
// (database, app, worker), because this app is stopped.
import { sql } from "drizzle-orm";
import { expect, inject, it } from "vitest";
import { createApiKey } from "@/lib/services/api-keys";
import { createDeployment } from "@/lib/services/deployments";
import { createPipeline } from "@/lib/services/pipelines";
import { createTeam } from "@/lib/services/teams";
import { completionEvent as ev, startFakeUpstream } from "../helpers/fake-upstream";
import { ownWorld } from "../helpers/own-world";

it("SIGTERM: the app finishes the request, then writes its usage counts and captures, then exits", async () => {
  const world = await ownWorld("stop", { app: { USAGE_FLUSH_MS: "600000" } });
  const { app, handle } = world;
  try {
    const team = await createTeam(handle.db, { slug: "stopping" });
    const modelKey = (await createApiKey(handle.db, { teamId: team.id, kind: "model" })).secret;
    await createDeployment(handle.db, { teamId: team.id, name: "tiny", model: inject("tinyModel") });
    const pipeline = await createPipeline(handle.db, { teamId: team.id, name: "served" });
    const res = await fetch(`${app.url}/deployments/stopping/tiny`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${modelKey}`,
        "content-type": "application/json",
        "x-pipeline-id": pipeline.id,
      },
      body: JSON.stringify({ prompt: "Hi", max_tokens: 3, temperature: 0 }),
    });
    expect(res.status).toBe(200);
    const { usage } = (await res.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
    const counted = () =>
      handle.db.execute<{ requests: number; prompt_tokens: number; completion_tokens: number }>(
        sql`select requests, prompt_tokens::int as prompt_tokens, completion_tokens::int as completion_tokens from usage_daily where team_id = ${team.id}`,
      );
    expect([...(await counted())]).toEqual([]); // still in the app's memory

    const exited = new Promise<number | null>((r) => app.child.once("exit", (code) => r(code)));
    app.child.kill("SIGTERM");
    expect(await exited).toBe(143); // the server's own exit, held until the drain ended
    expect([...(await counted())].map((r) => ({ ...r }))).toEqual([
      { requests: 1, prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens },
    ]);
    const samples = await handle.db.execute(sql`select id from samples where pipeline_id = ${pipeline.id}`);
    expect(samples.length).toBe(1);
    expect(app.logs.join("")).toContain("pending writes finished before stopping");
  } finally {
    await world.close();
  }
}, 120_000);

it("SIGTERM: a stream in flight runs to its end before the app exits", async () => {
  const world = await ownWorld("stop-stream");
  const { app, handle } = world;
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  // The upstream sends one token, then holds the rest until the test lets it go on.
  const up = await startFakeUpstream("vllm", {
    type: "raw",
    writes: [ev("Hello"), () => held, ev(" world", "stop") + "data: [DONE]\n\n"],
  });
  try {
    // The production server's first line says which routes it serves without Next's routing.
    expect(app.logs.join("")).toContain(
      "Served directly: /api/deployments/[team]/[name], /api/v1/pipelines/[id]/add, " +
        "/api/v1/pipelines/[id]/add-batch, /api/v1/pipelines/[id]/import, " +
        "/api/v1/chat/completions, /api/v1/completions\n",
    );
    const team = await createTeam(handle.db, { slug: "stopping-stream" });
    const modelKey = (await createApiKey(handle.db, { teamId: team.id, kind: "model" })).secret;
    await createDeployment(handle.db, {
      teamId: team.id,
      name: "up",
      upstream: { kind: "vllm", urls: [up.url], model: "m" },
    });
    const res = await fetch(`${app.url}/deployments/stopping-stream/up`, {
      method: "POST",
      headers: { authorization: `Bearer ${modelKey}`, "content-type": "application/json" },
      body: JSON.stringify({ prompt: "Hi", stream: true }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-frame-options")).toBe("DENY"); // next.config.mjs's headers, on this path too
    // fetch asks for gzip, but events are never compressed (they say no-transform): each goes out as it comes.
    expect(res.headers.get("content-encoding")).toBeNull();
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    while (!text.includes("Hello")) text += (await reader.read()).value ?? "";

    let exitCode: number | null | undefined;
    const exited = new Promise<void>((r) => app.child.once("exit", (code) => ((exitCode = code), r())));
    app.child.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, 500));
    expect(exitCode, "the app exited with a stream still open").toBeUndefined();

    release();
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += r.value;
    expect(text).toContain(`"completion":" world"`);
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
    await exited;
    expect(exitCode).toBe(143);
  } finally {
    release();
    await up.close();
    await world.close();
  }
}, 120_000);
