// POST {deployment_url}: response shape, every parameter's validation, stop / bad_words /
// logprobs / echo / n end to end, context length, and model-key auth. Real HTTP, built app, worker.
import { describe, expect, it } from "vitest";
import { DeploymentCompletionResponse } from "@/lib/contracts/deployments";
import { createApiKey, revokeApiKey } from "@/lib/services/api-keys";
import { createDeployment, deleteDeployment } from "@/lib/services/deployments";
import { baseUrl, db, makeTeam } from "../helpers/context";
import { complete, makeDeployment, makeTeamWithDeployment } from "../helpers/deployments";
import { holdUploads } from "../helpers/held-uploads";

const ErrorShape = (type: string, param?: string) => ({
  error: { type, message: expect.any(String), ...(param ? { param } : {}) },
});

describe("POST {deployment_url}", () => {
  it("completes a prompt: result[] per n, finish reason, stop, usage; schema-checked", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const res = await complete(dep, team.modelKey, { prompt: "Once upon a time", max_tokens: 8, seed: 1 });
    expect(res.status, res.text).toBe(200);
    const body = DeploymentCompletionResponse.parse(res.json);
    expect(body.result).toHaveLength(1);
    expect(body.result[0]!.completion.length).toBeGreaterThan(0);
    expect(body.result[0]).not.toHaveProperty("logprobs");
    expect(body.usage.completion_tokens).toBeGreaterThan(0);
    expect(body.usage.completion_tokens).toBeLessThanOrEqual(8);
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens + body.usage.completion_tokens);
    expect(res.headers.get("x-request-id")).toMatch(/^req_/);

    const three = DeploymentCompletionResponse.parse(
      (await complete(dep, team.modelKey, { prompt: "Once upon a time", max_tokens: 8, seed: 1, n: 3 })).json,
    );
    expect(three.result.map((r) => r.index)).toEqual([0, 1, 2]);
  });

  it("is reproducible with a seed, and echo prepends the prompt", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const req = { prompt: "The river", max_tokens: 10, seed: 7, temperature: 0.9 };
    const a = (await complete(dep, team.modelKey, req)).json;
    const b = (await complete(dep, team.modelKey, req)).json;
    expect(a.result[0].completion).toBe(b.result[0].completion);
    const echoed = (await complete(dep, team.modelKey, { ...req, echo: true })).json;
    expect(echoed.result[0].completion).toBe("The river" + a.result[0].completion);
  });

  it("stops at a stop sequence and omits it (also under stop_sequences)", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const free = (await complete(dep, team.modelKey, { prompt: "The old man", max_tokens: 40, temperature: 0 })).json;
    const text: string = free.result[0].completion;
    // A stop string taken from the middle of the greedy output: the output must end just before it.
    const stop = text.slice(10, 14);
    expect(stop.trim().length).toBeGreaterThan(0);
    const expected = text.slice(0, text.indexOf(stop));
    for (const key of ["stop", "stop_sequences"]) {
      const res = await complete(dep, team.modelKey, {
        prompt: "The old man",
        max_tokens: 40,
        temperature: 0,
        [key]: [stop],
      });
      expect(res.status, res.text).toBe(200);
      expect(res.json.result[0]).toMatchObject({ completion: expected, finish_reason: "stop", stop });
    }
  });

  it("never generates a bad word, over several seeds", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const base = { prompt: "Once upon a time there was", max_tokens: 30, temperature: 1 };
    // Words the model does produce for these seeds without the guard.
    const seeds = [1, 2, 3, 4];
    const outputs = await Promise.all(
      seeds.map(async (seed) => (await complete(dep, team.modelKey, { ...base, seed })).json.result[0].completion),
    );
    const words = [...new Set(outputs.join(" ").match(/[a-z]{3,}/g) ?? [])].slice(0, 6);
    expect(words.length).toBeGreaterThan(2);
    for (const seed of seeds) {
      const res = await complete(dep, team.modelKey, { ...base, seed, bad_words: words });
      expect(res.status, res.text).toBe(200);
      for (const w of words) expect(res.json.result[0].completion, `seed ${seed}`).not.toContain(w);
    }
  });

  it("returns logprobs when asked: one entry per token with that many alternatives", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const res = await complete(dep, team.modelKey, { prompt: "Hello", max_tokens: 5, seed: 3, logprobs: 3 });
    const body = DeploymentCompletionResponse.parse(res.json);
    const lp = body.result[0]!.logprobs!;
    expect(lp).toHaveLength(body.usage.completion_tokens);
    for (const t of lp) {
      expect(t.top_logprobs).toHaveLength(3);
      expect(t.logprob).toBeLessThanOrEqual(0);
    }
  });

  it("applies logit_bias: a banned token never appears", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const req = { prompt: "The dog", max_tokens: 12, temperature: 0, logprobs: 1 };
    const free = DeploymentCompletionResponse.parse((await complete(dep, team.modelKey, req)).json);
    const first = free.result[0]!.logprobs![0]!.token_id;
    const banned = DeploymentCompletionResponse.parse(
      (await complete(dep, team.modelKey, { ...req, logit_bias: { [String(first)]: -100 } })).json,
    );
    expect(banned.result[0]!.logprobs!.map((t) => t.token_id)).not.toContain(first);
  });

  it("rejects every out-of-range or wrongly typed parameter with 400 naming it", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const ok = { prompt: "Hi", max_tokens: 2 };
    const cases: [Record<string, unknown>, string][] = [
      [{ prompt: undefined }, "prompt"],
      [{ prompt: 5 }, "prompt"],
      [{ prompt: "" }, "prompt"],
      [{ max_tokens: 0 }, "max_tokens"],
      [{ max_tokens: 2.5 }, "max_tokens"],
      [{ max_tokens: "8" }, "max_tokens"],
      [{ max_tokens: 4096 }, "max_tokens"],
      [{ temperature: 1.5 }, "temperature"],
      [{ temperature: -0.1 }, "temperature"],
      [{ temperature: "hot" }, "temperature"],
      [{ top_p: 1.01 }, "top_p"],
      [{ top_p: -1 }, "top_p"],
      [{ top_k: 0 }, "top_k"],
      [{ top_k: 50_401 }, "top_k"],
      [{ top_k: 2.5 }, "top_k"],
      [{ repetition_penalty: 0.9 }, "repetition_penalty"],
      [{ repetition_penalty: "1.2" }, "repetition_penalty"],
      [{ stop: [""] }, "stop[0]"],
      [{ stop: [1] }, "stop"],
      [{ stop_sequences: 3 }, "stop_sequences"],
      [{ stop: ["a"], stop_sequences: ["b"] }, "stop_sequences"],
      [{ n: 0 }, "n"],
      [{ n: 17 }, "n"],
      [{ echo: "yes" }, "echo"],
      [{ bad_words: [""] }, "bad_words[0]"],
      [{ bad_words: ["ok", "x".repeat(129)] }, "bad_words[1]"],
      [{ bad_words: "x" }, "bad_words"],
      [{ logit_bias: { the: 101 } }, "logit_bias.the"],
      [{ logit_bias: { the: "x" } }, "logit_bias.the"],
      [{ logit_bias: [1] }, "logit_bias"],
      [{ tfs: 1.5 }, "tfs"],
      [{ tfs: -0.5 }, "tfs"],
      [{ logprobs: 0 }, "logprobs"],
      [{ logprobs: 6 }, "logprobs"],
      [{ logprobs: true }, "logprobs"],
      [{ stream: "true" }, "stream"],
      [{ seed: -1 }, "seed"],
      [{ seed: 1.5 }, "seed"],
      [{ temprature: 0.5 }, "temprature"],
    ];
    for (const [patch, param] of cases) {
      const res = await complete(dep, team.modelKey, { ...ok, ...patch });
      expect(res.status, JSON.stringify(patch)).toBe(400);
      expect(res.json, JSON.stringify(patch)).toEqual(ErrorShape("invalid_request", param));
    }
    // A logit_bias token id outside the vocabulary is caught by the worker, still a 400.
    const big = await complete(dep, team.modelKey, { ...ok, logit_bias: { "999999": 5 } });
    expect(big.status).toBe(400);
    expect(big.json).toEqual(ErrorShape("invalid_request", "logit_bias"));
    const notJson = await fetch(dep.url, {
      method: "POST",
      headers: { authorization: `Bearer ${team.modelKey}` },
      body: "{nope",
    });
    expect(notJson.status).toBe(400);
  });

  it("accepts the edges of every range and null as 'not given'", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const res = await complete(dep, team.modelKey, {
      prompt: "Hi",
      max_tokens: 1,
      temperature: 0,
      top_p: 1,
      top_k: 50_400,
      repetition_penalty: 1,
      tfs: 1,
      logprobs: 5,
      n: 1,
      stop: null,
      logit_bias: null,
      seed: 0,
    });
    expect(res.status, res.text).toBe(200);
  });

  it("prompt tokens + max_tokens over the context: 400 context_length_exceeded with both numbers", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const prompt = "The river runs under the old bridge. ".repeat(40);
    const res = await complete(dep, team.modelKey, { prompt, max_tokens: 1000 });
    expect(res.status).toBe(400);
    expect(res.json).toEqual(ErrorShape("context_length_exceeded", "max_tokens"));
    const m = /prompt tokens \((\d+)\) \+ max_tokens \((\d+)\)/.exec(res.json.error.message);
    expect(m, res.json.error.message).not.toBeNull();
    expect(Number(m![1])).toBeGreaterThan(100);
    expect(Number(m![2])).toBe(1000);
    expect(res.json.error.message).toMatch(/2048/);
  });
});

describe("a deployment whose generation cannot start", () => {
  it("answers 503 with the reason in the error body, for POST and before any event for GET", async () => {
    const team = await makeTeam();
    const broken = await createDeployment(db().db, {
      teamId: team.id,
      name: "broken",
      model: "/nonexistent/model-folder",
    });
    try {
      const url = `${baseUrl}/deployments/${team.slug}/broken`;
      // The worker fails to load it within a heartbeat; until then the request waits for it.
      const post = await complete({ id: broken.id, name: "broken", path: "", url }, team.modelKey, { prompt: "Hi" });
      expect(post.status, post.text).toBe(503);
      expect(post.json).toEqual(ErrorShape("internal"));
      expect(post.json.error.message).toMatch(/could not be loaded: .*nonexistent\/model-folder/);
      const get = await fetch(`${url}?prompt=Hi&authorization=${team.modelKey}`);
      expect(get.status).toBe(503);
      expect(get.headers.get("content-type")).toMatch(/json/);
      expect(await get.json()).toEqual(ErrorShape("internal"));
    } finally {
      await deleteDeployment(db().db, { teamId: team.id, name: "broken" });
    }
  });
});

describe("model-key auth on deployments", () => {
  it("401 with the error body for a missing, malformed, unknown or revoked key, and for an API key", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const body = { prompt: "Hi", max_tokens: 1 };
    const call = (authorization?: string) =>
      fetch(dep.url, {
        method: "POST",
        headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) },
        body: JSON.stringify(body),
      });
    for (const auth of [undefined, "Basic x", `Bearer lmp_mk_${"A".repeat(43)}`, `Bearer ${team.apiKey}`]) {
      const res = await call(auth);
      expect(res.status, auth).toBe(401);
      expect(await res.json(), auth).toEqual(ErrorShape("unauthorized"));
    }
    expect((await call(`Bearer ${team.modelKey}`)).status).toBe(200);
    const extra = await createApiKey(db().db, { teamId: team.id, kind: "model" });
    await revokeApiKey(db().db, { id: extra.key.id });
    const revoked = await call(`Bearer ${extra.secret}`);
    expect(revoked.status).toBe(401);
    expect(((await revoked.json()) as any).error.message).toMatch(/revoked/);
  });

  it("401 for a model key of another team, and for a key scoped to another deployment", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const other = await makeTeam();
    const res = await complete(dep, other.modelKey, { prompt: "Hi", max_tokens: 1 });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(ErrorShape("unauthorized"));

    const second = await makeDeployment(team);
    const scoped = await createApiKey(db().db, { teamId: team.id, kind: "model", deploymentId: second.id });
    expect((await complete(dep, scoped.secret, { prompt: "Hi", max_tokens: 1 })).status).toBe(401);
    expect((await complete(second, scoped.secret, { prompt: "Hi", max_tokens: 1 })).status).toBe(200);
  });

  it("404 for an unknown deployment of the key's team; a deleted deployment stops answering", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const missing = { ...dep, url: dep.url.replace(dep.name, "no-such-deployment") };
    const res = await complete(missing, team.modelKey, { prompt: "Hi", max_tokens: 1 });
    expect(res.status).toBe(404);
    expect(res.json).toEqual(ErrorShape("not_found"));
    await deleteDeployment(db().db, { teamId: team.id, name: dep.name });
    expect((await complete(dep, team.modelKey, { prompt: "Hi", max_tokens: 1 })).status).toBe(404);
  });
});

describe("request bodies in flight on deployments", () => {
  it("a model key's bodies count against its team's (429 past 64 MiB); another team's key is not held up", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const other = await makeTeamWithDeployment();
    // 64 chunked bodies (each counts as the 1 MiB limit until parsed), kept open.
    const uploads = holdUploads(dep.url, { authorization: `Bearer ${team.modelKey}` }, 64, '{"prompt": "Hi", ');
    const small = () => complete(dep, team.modelKey, { prompt: "Hi", max_tokens: 1 });
    await new Promise((r) => setTimeout(r, 500));
    await expect.poll(async () => (await small()).status, { timeout: 10_000 }).toBe(429);
    expect((await small()).json.error.message).toMatch(/^Your team is sending 64\.0 MiB of request bodies at once/);
    expect((await complete(other.dep, other.team.modelKey, { prompt: "Hi", max_tokens: 1 })).status).toBe(200);
    uploads.finish('"max_tokens": 1}');
    // Answered (some 429 for the key's concurrent generations), and the team's budget is back.
    const statuses = await uploads.answered();
    expect(statuses.every((s) => s === 200 || s === 429)).toBe(true);
    await expect.poll(async () => (await small()).status, { timeout: 10_000 }).toBe(200);
  });
});
