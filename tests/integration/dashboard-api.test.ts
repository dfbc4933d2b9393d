import path from "node:path";
import { describe, expect, inject, it } from "vitest";
import { ApiKeySchema } from "@/lib/contracts/api-keys";
import { UsageResponse } from "@/lib/contracts/usage";
import { createApiKey } from "@/lib/services/api-keys";
import { AddSampleBody, PipelineSchema, SampleSchema } from "@/lib/contracts/pipelines";
import { createPipeline } from "@/lib/services/pipelines";
import { setTeamLimits } from "@/lib/services/teams";
import { addSample } from "@/lib/services/samples";
import type { PlaygroundParams } from "@/lib/ui/playground-query";
import { baseUrl, client, db, makeTeam } from "../helpers/context";
import { as, email, newUser, PASSWORD, signIn, signUp } from "../helpers/session";
import { makeDeployment, parseSse } from "../helpers/deployments";

/**
 * The dashboard's JSON endpoints (/api/ui/**): next-auth session instead of an API key,
 * the current team from the session (and the team cookie, checked against memberships).
 */
describe("sign-up", () => {
  it("creates a user who owns a new team, and signs in with next-auth", async () => {
    const address = email().toUpperCase();
    const res = await signUp({ email: address, password: PASSWORD, name: "Ada", teamName: "Crème Brûlée Labs" });
    expect(res.status).toBe(201);
    expect(res.json.user.email).toBe(address.toLowerCase());
    expect(res.json.team.slug).toMatch(/^creme-brulee-labs(-[a-z0-9]+)?$/);
    const cookie = await signIn(address.toLowerCase());
    const pipelines = await as(cookie).get("/api/ui/pipelines");
    expect(pipelines.status).toBe(200);
    expect(pipelines.json).toEqual([]);
  });

  it("gives a taken team slug a suffix rather than failing", async () => {
    const a = await signUp({ email: email(), password: PASSWORD, teamName: "Same Name" });
    const b = await signUp({ email: email(), password: PASSWORD, teamName: "Same Name" });
    expect([a.status, b.status]).toEqual([201, 201]);
    expect(b.json.team.slug).not.toBe(a.json.team.slug);
    expect(b.json.team.slug).toMatch(/^same-name-[a-z0-9]{4}$/);
  });

  it("validates with the users schema and refuses a second account for an email", async () => {
    const bad = await signUp({ email: "nope", password: "short" });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ type: "invalid_request", param: "email" });
    const short = await signUp({ email: email(), password: "short" });
    expect(short.json.error.param).toBe("password");
    const unknown = await signUp({ email: email(), password: PASSWORD, role: "owner" });
    expect(unknown.json.error.param).toBe("role");

    const address = email();
    expect((await signUp({ email: address, password: PASSWORD })).status).toBe(201);
    const again = await signUp({ email: address, password: "another password" });
    expect(again.status).toBe(409);
    expect(again.json.error).toMatchObject({ type: "conflict", param: "email" });
    // The failed attempt created nothing: the original password still signs in.
    await expect(signIn(address)).resolves.toContain("next-auth.session-token=");
    await expect(signIn(address, "another password")).rejects.toThrow(/sign-in failed/);
  });
});

describe("signed-out deep links", () => {
  it("go to sign-in with the page asked for, query included, as the way back", async () => {
    for (const link of ["/pipelines/pipe_x1?userId=u2&meta.lang=en", "/datasets/ds_x1", "/settings/members"]) {
      // A header the client sends under the proxy's name is replaced by the real path.
      const res = await fetch(`${baseUrl}${link}`, {
        redirect: "manual",
        headers: { "x-lmp-request-path": "//evil.example" },
      });
      expect(res.status).toBe(307);
      const to = new URL(res.headers.get("location")!, baseUrl);
      expect(to.pathname).toBe("/sign-in");
      expect(to.searchParams.get("callbackUrl")).toBe(link);
    }
  });
});

describe("session-authenticated endpoints", () => {
  it("answer 401 with the error body without a session, and ignore API keys", async () => {
    const team = await makeTeam();
    for (const res of [
      await client().get("/api/ui/pipelines"),
      await client(team.apiKey).get("/api/ui/keys"),
      await client().post("/api/ui/pipelines", { name: "x" }),
      await as("next-auth.session-token=forged").get("/api/ui/pipelines"),
    ]) {
      expect(res.status).toBe(401);
      expect(res.json).toEqual({ error: { type: "unauthorized", message: "Sign in to continue." } });
    }
  });

  it("refuse writes from another origin", async () => {
    const { cookie } = await newUser();
    const res = await as(cookie).post("/api/ui/pipelines", { name: "x" }, { origin: "https://evil.example" });
    expect(res.status).toBe(403);
    expect(res.json.error.type).toBe("forbidden");
    expect((await as(cookie).get("/api/ui/pipelines")).json).toEqual([]);
    const same = await as(cookie).post("/api/ui/pipelines", { name: "ok" }, { origin: baseUrl });
    expect(same.status).toBe(200);
  });

  it("show only the current team's pipelines, samples and counts", async () => {
    const { cookie, team } = await newUser();
    const other = await makeTeam();
    const foreign = await createPipeline(db().db, { teamId: other.id, name: "theirs" });
    const created = await as(cookie).post("/api/ui/pipelines", { name: "  mine  " });
    expect(PipelineSchema.parse(created.json)).toMatchObject({ name: "mine", teamId: team.id });
    const mine = created.json.id as string;
    for (let i = 0; i < 7; i++) {
      await addSample(db().db, {
        teamId: team.id,
        pipelineId: mine,
        sample: AddSampleBody.parse({
          messages: [{ role: "user", content: `m${i}` }],
          userId: `u${i % 2}`,
          metadata: { n: String(i) },
        }),
      });
    }
    const list = await as(cookie).get("/api/ui/pipelines");
    expect(list.json.map((p: { id: string }) => p.id)).toEqual([mine]);

    const count = await as(cookie).post(`/api/ui/pipelines/${mine}/count`, { userId: "u0" });
    expect(count.json).toEqual({ count: 4 });
    const page = await as(cookie).post(`/api/ui/pipelines/${mine}/samples`, { userId: "u0", limit: 2, offset: 1 });
    expect(page.status).toBe(200);
    const samples = page.json.samples.map((s: unknown) => SampleSchema.parse(s));
    expect(samples.map((s: { metadata: { n: string } }) => s.metadata.n)).toEqual(["2", "4"]);

    for (const path of [`/api/ui/pipelines/${foreign.id}/count`, `/api/ui/pipelines/${foreign.id}/samples`]) {
      const res = await as(cookie).post(path, { limit: 10 });
      expect(res.status, path).toBe(404);
      expect(res.json.error.type).toBe("not_found");
    }
  });

  it("bound the page size and reject unknown filters like the API", async () => {
    const { cookie } = await newUser();
    const { json: p } = await as(cookie).post("/api/ui/pipelines", { name: "p" });
    const big = await as(cookie).post(`/api/ui/pipelines/${p.id}/samples`, { limit: 501 });
    expect(big.status).toBe(400);
    expect(big.json.error.param).toBe("limit");
    const missing = await as(cookie).post(`/api/ui/pipelines/${p.id}/samples`, {});
    expect(missing.json.error.param).toBe("limit");
    const typo = await as(cookie).post(`/api/ui/pipelines/${p.id}/count`, { user_id: "u1" });
    expect(typo.status).toBe(400);
    expect(typo.json.error.param).toBe("user_id");
  });
});

describe("team switching", () => {
  it("switches only to a team the user belongs to; a forged team cookie is ignored", async () => {
    const { cookie, team } = await newUser();
    const other = await makeTeam();
    const theirs = await createPipeline(db().db, { teamId: other.id, name: "theirs" });

    const refused = await as(cookie).post("/api/ui/team", { teamId: other.id });
    expect(refused.status).toBe(404);
    const forged = as(`${cookie}; lmp_team=${other.id}`);
    expect((await forged.get("/api/ui/pipelines")).json).toEqual([]);
    expect((await forged.post(`/api/ui/pipelines/${theirs.id}/count`, {})).status).toBe(404);

    const own = await as(cookie).post("/api/ui/team", { teamId: team.id });
    expect(own.status).toBe(200);
    expect(own.headers.get("set-cookie")).toMatch(/^lmp_team=team_[a-z0-9]+; .*HttpOnly/i);
  });
});

describe("keys", () => {
  it("create (secret once), list without secrets, revoke; another team's key is not found", async () => {
    const { cookie } = await newUser();
    const scoped = await as(cookie).post("/api/ui/keys", { kind: "api", deploymentId: "dep_x" });
    expect(scoped.status).toBe(400);
    expect(scoped.json.error.param).toBe("deploymentId");
    const unknownDeployment = await as(cookie).post("/api/ui/keys", { kind: "model", deploymentId: "dep_x" });
    expect(unknownDeployment.status).toBe(404);

    const created = await as(cookie).post("/api/ui/keys", { kind: "api", name: " backend " });
    expect(created.status).toBe(201);
    expect(ApiKeySchema.parse(created.json.key)).toMatchObject({ name: "backend", kind: "api", revokedAt: null });
    const secret = created.json.secret as string;
    expect(created.json.key.prefix).toBe(secret.slice(0, 11));
    expect((await client(secret).get("/v1/pipelines/list")).status).toBe(200);

    const list = await as(cookie).get("/api/ui/keys");
    expect(list.json).toHaveLength(1);
    expect(list.text).not.toContain(secret);
    expect(list.text).not.toMatch(/"hash"/);

    const other = await makeTeam();
    expect((await as(cookie).post(`/api/ui/keys/${other.keyId}/revoke`)).status).toBe(404);
    expect((await client(other.apiKey).get("/v1/pipelines/list")).status).toBe(200);

    const revoked = await as(cookie).post(`/api/ui/keys/${created.json.key.id}/revoke`);
    expect(revoked.status).toBe(200);
    expect((await client(secret).get("/v1/pipelines/list")).status).toBe(401);
  });

  it("a model key's capture scope: the team's live pipelines only, model keys only, listed", async () => {
    const { cookie } = await newUser();
    const pipeline = await as(cookie).post("/api/ui/pipelines", { name: "support" });
    expect(pipeline.status, pipeline.text).toBe(200);
    const other = await makeTeam();
    const foreign = (await client(other.apiKey).post("/v1/pipelines/create", { name: "theirs" })).json.id;
    const refusals: [unknown, number][] = [
      [{ kind: "api", capturePipelines: [pipeline.json.id] }, 400],
      [{ kind: "model", capturePipelines: [foreign] }, 404],
      [{ kind: "model", capturePipelines: [pipeline.json.id, "pipe_nope"] }, 404],
      [{ kind: "model", capturePipelines: "all" }, 400],
    ];
    for (const [body, status] of refusals) {
      const res = await as(cookie).post("/api/ui/keys", body);
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(res.json.error.param).toBe("capturePipelines");
    }
    expect((await as(cookie).get("/api/ui/keys")).json).toEqual([]);

    const scoped = await as(cookie).post("/api/ui/keys", { kind: "model", capturePipelines: [pipeline.json.id] });
    expect(scoped.status, scoped.text).toBe(201);
    expect(scoped.json.key.capturePipelines).toEqual([pipeline.json.id]);
    const any = await as(cookie).post("/api/ui/keys", { kind: "model" });
    expect(any.json.key.capturePipelines).toBeNull();
    const none = await as(cookie).post("/api/ui/keys", { kind: "model", capturePipelines: [] });
    expect(none.json.key.capturePipelines).toEqual([]);
    const listed = (await as(cookie).get("/api/ui/keys")).json as { id: string; capturePipelines: unknown }[];
    expect(listed.find((k) => k.id === scoped.json.key.id)!.capturePipelines).toEqual([pipeline.json.id]);
  });
});

describe("the pipeline page", () => {
  it("renders a URL whose filter the API refuses, leaving the error to the page's own request", async () => {
    const { cookie } = await newUser();
    const id = (await as(cookie).post("/api/ui/pipelines", { name: "p" })).json.id as string;
    const page = await as(cookie).get(`/pipelines/${id}?sampleSize=2000000&sampleSeed=1`);
    expect(page.status).toBe(200);
    expect(page.text).toContain("Filter the samples");
  });
});

describe("a member's limits", () => {
  // Before, the dashboard's routes and its playground counted nothing: a member could stream as
  // much as they liked, past every limit the team's API keys have.
  it("count the dashboard's requests per minute as a key's", async () => {
    const { cookie, team } = await newUser();
    await setTeamLimits(db().db, { teamId: team.id, limits: { requestsPerMinute: 3 } });
    for (let i = 0; i < 3; i++) {
      const res = await as(cookie).get("/api/ui/pipelines");
      expect(res.status).toBe(200);
      expect(res.headers.get("ratelimit-remaining")).toBe(String(2 - i));
    }
    const refused = await as(cookie).get("/api/ui/pipelines");
    expect(refused.status).toBe(429);
    expect(refused.json.error.message).toMatch(/^Your dashboard session made more than 3 requests in a minute/);
    expect(refused.headers.get("retry-after")).toBeTruthy();
  });

  it("hold the playground to the team's tokens per minute", async () => {
    const { cookie, team } = await newUser();
    const dep = await makeDeployment(team);
    await setTeamLimits(db().db, { teamId: team.id, limits: { tokensPerMinute: 10 } });
    const body = { prompt: "The dog", max_tokens: 12, temperature: 0 };
    const first = await as(cookie).post(`/api/ui/deployments/${dep.name}/stream`, body);
    expect(first.status, first.text).toBe(200);
    const second = await as(cookie).post(`/api/ui/deployments/${dep.name}/stream`, body);
    expect(second.status).toBe(429);
    expect(second.json.error.message).toMatch(/^Your dashboard session used its 10 tokens of the last minute/); // Its usage is the dashboard's (key ""), not a key named after the member's user id.
    const { secret } = await createApiKey(db().db, { teamId: team.id, kind: "api", name: "usage" });
    const byKey = async () => UsageResponse.parse((await client(secret).get("/v1/usage?groupBy=key")).json).data;
    await expect.poll(async () => (await byKey()).length, { timeout: 10_000 }).toBe(1);
    expect((await byKey())[0]).toMatchObject({ key: "", requests: 1 });
  });
});

describe("playground stream", () => {
  it("validates with the deployment endpoint's schema and finds only the team's deployments", async () => {
    const { cookie } = await newUser();
    const bad = await as(cookie).post("/api/ui/deployments/demo/stream", { prompt: "hi", temperature: 2 });
    expect(bad.status).toBe(400);
    expect(bad.json.error.param).toBe("temperature");
    const streamParam = await as(cookie).post("/api/ui/deployments/demo/stream", { prompt: "hi", stream: true });
    expect(streamParam.json.error.param).toBe("stream");
    const unknown = await as(cookie).post("/api/ui/deployments/nope/stream", { prompt: "hi" });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.type).toBe("not_found");
    expect((await client().post("/api/ui/deployments/nope/stream", { prompt: "hi" })).status).toBe(401);
    // A POST with a JSON body: the old query-string form is gone (a long prompt outgrew it).
    expect((await as(cookie).get("/api/ui/deployments/nope/stream?prompt=hi")).status).toBe(405);
  });

  it("applies the parameters the public GET stream lacks: logit_bias, bad_words, tfs", async () => {
    const { cookie, team } = await newUser();
    const dep = await makeDeployment(team);
    const stream = async (params: Partial<PlaygroundParams>) => {
      const body = { prompt: "The dog", max_tokens: 12, temperature: 0, logprobs: 1, ...params };
      const res = await as(cookie).post(`/api/ui/deployments/${dep.name}/stream`, body);
      expect(res.status, res.text).toBe(200);
      const frames = parseSse(res.text)
        .map((e) => e.data)
        .filter((d) => d !== "[DONE]")
        .map((d) => JSON.parse(d) as { completion?: string; logprobs?: { token: string; token_id: number }[] });
      const tokens = frames.flatMap((f) => f.logprobs ?? []);
      return { text: frames.map((f) => f.completion ?? "").join(""), tokens };
    };
    const free = await stream({});
    expect(free.tokens.length).toBeGreaterThan(0);
    // Greedy: banning the first token by id changes the completion, and that token never comes.
    const first = free.tokens[0]!.token_id;
    const biased = await stream({ logit_bias: { [String(first)]: -100 } });
    expect(biased.tokens.map((t) => t.token_id)).not.toContain(first);
    // A word a sampled completion contains is never generated once it is a bad word.
    const sampled = await stream({ temperature: 1, seed: 3, max_tokens: 30 });
    const word = sampled.text.match(/[a-z]{3,}/)?.[0];
    expect(word, sampled.text).toBeDefined();
    const guarded = await stream({ temperature: 1, seed: 3, max_tokens: 30, bad_words: [word!] });
    expect(guarded.text).not.toContain(word);
    // Tail-free sampling at 0 keeps only the most likely token: a sampled run (temperature 1)
    // then equals the greedy one.
    const tail = await stream({ temperature: 1, tfs: 0, seed: 5 });
    expect(tail.text).toBe(free.text);
  });

  it("saves to a pipeline: the dashboard's sample page carries the generation facts; a foreign pipeline is 404", async () => {
    const { cookie, team } = await newUser();
    const dep = await makeDeployment(team);
    const pipeline = (await as(cookie).post("/api/ui/pipelines", { name: "saved" })).json.id as string;
    const foreign = await createPipeline(db().db, { teamId: (await makeTeam()).id, name: "theirs" });
    const refused = await as(cookie).post(`/api/ui/deployments/${dep.name}/stream`, {
      prompt: "Hi",
      pipeline: { id: foreign.id },
    });
    expect(refused.status).toBe(404);
    expect(refused.json.error).toMatchObject({ type: "not_found", param: "pipeline" });

    const body = { prompt: "The dog", max_tokens: 6, seed: 1, pipeline: { id: pipeline } };
    const res = await as(cookie).post(`/api/ui/deployments/${dep.name}/stream`, body);
    expect(res.status, res.text).toBe(200);
    const text = parseSse(res.text)
      .map((e) => e.data)
      .filter((d) => d !== "[DONE]")
      .map((d) => (JSON.parse(d) as { completion?: string }).completion ?? "")
      .join("");
    const page = async () => (await as(cookie).post(`/api/ui/pipelines/${pipeline}/samples`, { limit: 10 })).json;
    await expect.poll(async () => (await page()).samples.length, { timeout: 10_000 }).toBe(1);
    const [sample] = (await page()).samples;
    expect(sample.generation).toMatchObject({
      endpoint: "deployment",
      deployment: `${team.slug}/${dep.name}`,
      streamed: true,
      n: 1,
    });
    const messages = await (await fetch(sample.url)).json();
    expect(messages).toEqual([
      { role: "user", content: "The dog" },
      { role: "assistant", content: text },
    ]);
  });
});

describe("deployments", () => {
  it("refuse a dtype the engine cannot serve with the reason, creating nothing", async () => {
    const { cookie } = await newUser();
    const q1 = await as(cookie).post("/api/ui/deployments", { name: "one-bit", model: "org/m", dtype: "q1" });
    expect(q1.status).toBe(400);
    expect(q1.json).toMatchObject({
      error: {
        type: "invalid_request",
        param: "dtype",
        message: expect.stringMatching(
          /^Invalid 'dtype': q1 is not supported: 1-bit MatMulNBits weights, which onnxruntime's CPU kernels do not run \(they take 2, 4 and 8 bits\); must be one of auto, .*, q2, q2f16$/,
        ),
      },
    });
    const unknown = await as(cookie).post("/api/ui/deployments", { name: "q3", model: "org/m", dtype: "q3" });
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.message).toMatch(/^Invalid 'dtype': must be one of auto, /);
    expect((await as(cookie).get("/api/ui/deployments")).json).toEqual([]);
  });

  it("count against the team's model deployments limit; upstream deployments do not", async () => {
    const { cookie, team } = await newUser();
    await setTeamLimits(db().db, { teamId: team.id, limits: { modelDeployments: 2 } });
    for (const name of ["a", "b"])
      expect((await as(cookie).post("/api/ui/deployments", { name, model: "org/m" })).status).toBe(201);
    const third = await as(cookie).post("/api/ui/deployments", { name: "c", model: "org/m", dtype: "q4" });
    expect(third.status).toBe(403);
    expect(third.json.error).toMatchObject({
      type: "forbidden",
      param: "model",
      message: expect.stringContaining("already has 2 model deployments (limit 2)"),
    });
    const up = await as(cookie).post("/api/ui/deployments", {
      name: "up",
      upstream: { kind: "vllm", urls: ["http://127.0.0.1:9"], model: "m" },
    });
    expect(up.status, up.text).toBe(201);
    const names = ((await as(cookie).get("/api/ui/deployments")).json as { name: string }[]).map((d) => d.name);
    expect(names.sort()).toEqual(["a", "b", "up"]);
  });

  it("take hub ids and folders inside MODEL_FOLDERS only: no other folder of the workers' machines", async () => {
    const { cookie } = await newUser();
    const tiny = inject("tinyModel");
    // A folder of the machine (another team's model, or anything else there), by any spelling.
    for (const model of [
      "/etc",
      path.resolve(tiny, "..", ".."),
      `${path.dirname(tiny)}-other/x`,
      "./models/x",
      "../x",
      "a/../../b",
    ]) {
      const res = await as(cookie).post("/api/ui/deployments", { name: "sneaky", model });
      expect({ model, status: res.status, param: res.json.error?.param }).toEqual({
        model,
        status: 400,
        param: "model",
      });
      expect(res.json.error.message).toContain(`or a folder inside ${path.dirname(tiny)}`);
    }
    expect((await as(cookie).get("/api/ui/deployments")).json).toEqual([]);
    for (const [name, model] of [
      ["hub", "org/m@v1"],
      ["folder", tiny],
    ]) {
      const res = await as(cookie).post("/api/ui/deployments", { name, model });
      expect(res.status, res.text).toBe(201);
      expect(res.json.model).toBe(model);
    }
  });
});
