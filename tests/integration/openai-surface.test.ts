// The OpenAI surface for local deployments, through the official `openai` client over real
// HTTP: POST /v1/completions (streamed and not, n, echo, logprobs, stop, include_usage),
// GET /v1/models, chat logprobs and include_usage, errors, and that the same quota and usage
// apply as on the deployment endpoint.
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { ChatCompletionChunk, ChatCompletionResponse } from "@/lib/contracts/chat-completions";
import { DeploymentCompletionResponse } from "@/lib/contracts/deployments";
import { CompletionsChunk, CompletionsResponse, ModelList, type TextLogprobs } from "@/lib/contracts/openai";
import { UsageResponse } from "@/lib/contracts/usage";
import { setTeamLimits } from "@/lib/services/teams";
import { baseUrl, client, db, makeTeam } from "../helpers/context";
import { complete, makeDeployment, makeTeamWithDeployment, noEosBias, parseSse } from "../helpers/deployments";
import { expectDocumented } from "../helpers/openapi";

const openai = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${baseUrl}/v1`, maxRetries: 0 });

/** POST a streamed request and parse its events: the chunks, and whether it ended with [DONE]. */
async function rawStream(apiKey: string, path: string, body: Record<string, unknown>) {
  const res = await fetch(`${baseUrl}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ ...body, stream: true }),
  });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
  const events = parseSse(await res.text());
  expect(events.at(-1)!.data).toBe("[DONE]");
  return events.slice(0, -1).map((e) => JSON.parse(e.data) as unknown);
}

/** The invariants of OpenAI's logprobs object for a choice's text. */
function expectConsistentLogprobs(lp: TextLogprobs | null | undefined, text: string, k: number) {
  expect(lp).toBeTruthy();
  const { tokens, token_logprobs, top_logprobs, text_offset } = lp!;
  expect(tokens.length).toBeGreaterThan(0);
  expect(token_logprobs).toHaveLength(tokens.length);
  expect(top_logprobs).toHaveLength(tokens.length);
  expect(text_offset).toHaveLength(tokens.length);
  expect(tokens.join("")).toBe(text);
  let offset = 0;
  tokens.forEach((token, i) => {
    expect(text_offset[i]).toBe(offset);
    offset += token.length;
    expect(token_logprobs[i]).toBeLessThanOrEqual(0);
    const alternatives = Object.values(top_logprobs[i]!);
    expect(alternatives.length).toBeGreaterThanOrEqual(1);
    expect(alternatives.length).toBeLessThanOrEqual(k + 1);
    for (const v of alternatives) expect(v).toBeLessThanOrEqual(0);
    // The chosen token is among them (OpenAI always includes it).
    expect(alternatives.some((v) => Math.abs(v - token_logprobs[i]!) < 1e-9)).toBe(true);
  });
  for (let i = 1; i < text_offset.length; i++) expect(text_offset[i]).toBeGreaterThanOrEqual(text_offset[i - 1]!);
}

describe("POST /v1/completions", () => {
  it("answers in OpenAI's text_completion shape, with the deployment endpoint's text and usage", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const ai = openai(team.apiKey);
    const req = { prompt: "Once upon a time", max_tokens: 12, seed: 7, temperature: 0.8 };
    const done = await ai.completions.create({ model: `${team.slug}/${dep.name}`, ...req });
    expect(done.object).toBe("text_completion");
    expect(done.id).toMatch(/^cmpl-/);
    expect(done.model).toBe(`${team.slug}/${dep.name}`);
    expect(done.choices).toHaveLength(1);
    expect(done.choices[0]!.logprobs).toBeNull();
    const raw = DeploymentCompletionResponse.parse((await complete(dep, team.modelKey, req)).json);
    expect(done.choices[0]!.text).toBe(raw.result[0]!.completion);
    expect(done.choices[0]!.finish_reason).toBe(raw.result[0]!.finish_reason);
    expect(done.usage).toEqual(raw.usage);

    // The same, schema-checked, by the bare name, and as the OpenAPI document describes it.
    const res = await client(team.apiKey).post("/v1/completions", { model: dep.name, ...req });
    expect(res.status, res.text).toBe(200);
    expect(CompletionsResponse.parse(res.json).choices[0]!.text).toBe(raw.result[0]!.completion);
    await expectDocumented("POST", "/v1/completions", res);

    // The deployment endpoint's sampling parameters reach the engine under the same names.
    const extra = { top_k: 4, repetition_penalty: 1.3, tfs: 0.9, bad_words: [" the"], logit_bias: { "260": -5 } };
    const tuned = await client(team.apiKey).post("/v1/completions", { model: dep.name, ...req, ...extra });
    const tunedRaw = DeploymentCompletionResponse.parse(
      (await complete(dep, team.modelKey, { ...req, ...extra })).json,
    );
    expect(tuned.json.choices[0].text).toBe(tunedRaw.result[0]!.completion);
    expect(tuned.json.choices[0].text).not.toBe(raw.result[0]!.completion);
  });

  it("streams text_completion chunks that add up to the non-streamed answer, for every n, then [DONE]", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const ai = openai(team.apiKey);
    const req = { model: dep.name, prompt: "The old man", max_tokens: 14, seed: 5, n: 3 };
    const whole = await ai.completions.create(req);
    expect(whole.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(new Set(whole.choices.map((c) => c.text)).size).toBeGreaterThan(1);

    const stream = await ai.completions.create({ ...req, stream: true });
    const texts = ["", "", ""];
    const finishes: (string | null)[] = [null, null, null];
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      expect(chunk.object).toBe("text_completion");
      expect(chunk.usage ?? undefined).toBeUndefined(); // no include_usage: no usage
      for (const c of chunk.choices) {
        texts[c.index] += c.text;
        if (c.finish_reason) finishes[c.index] = c.finish_reason;
      }
    }
    expect(chunks).toBeGreaterThan(6);
    expect(texts).toEqual(whole.choices.map((c) => c.text));
    expect(finishes).toEqual(whole.choices.map((c) => c.finish_reason));

    // On the wire: data-only events, one id, each chunk in the documented shape.
    const raw = (await rawStream(team.apiKey, "/v1/completions", req)).map((c) => CompletionsChunk.parse(c));
    expect(new Set(raw.map((c) => c.id)).size).toBe(1);
  });

  it("include_usage: a last chunk with empty choices and the usage of the same non-streamed call", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const ai = openai(team.apiKey);
    const req = { model: dep.name, prompt: "In the garden", max_tokens: 10, seed: 9, n: 2 };
    const whole = await ai.completions.create(req);
    const chunks: OpenAI.Completions.Completion[] = [];
    for await (const c of await ai.completions.create({
      ...req,
      stream: true,
      stream_options: { include_usage: true },
    }))
      chunks.push(c);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual(whole.usage);
    expect(chunks.slice(0, -1).every((c) => !c.usage)).toBe(true);
    expect(
      chunks
        .flatMap((c) => c.choices)
        .filter((c) => c.index === 1)
        .map((c) => c.text)
        .join(""),
    ).toBe(whole.choices[1]!.text);
  });

  it("echo puts the prompt before the completion; stop cuts it before the stop string", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const ai = openai(team.apiKey);
    const req = { model: dep.name, prompt: "Once upon a time", max_tokens: 20, seed: 4 };
    const plain = await ai.completions.create(req);
    const echoed = await ai.completions.create({ ...req, echo: true });
    expect(echoed.choices[0]!.text).toBe(req.prompt + plain.choices[0]!.text);
    expect(echoed.usage).toEqual(plain.usage);
    let streamed = "";
    for await (const c of await ai.completions.create({ ...req, echo: true, stream: true }))
      streamed += c.choices[0]?.text ?? "";
    expect(streamed).toBe(echoed.choices[0]!.text);

    const text = plain.choices[0]!.text;
    const stop = text.slice(5, 8);
    const stopped = await ai.completions.create({ ...req, stop });
    expect(stopped.choices[0]!.finish_reason).toBe("stop");
    expect(stopped.choices[0]!.text).toBe(text.slice(0, text.indexOf(stop)));
    const listed = await ai.completions.create({ ...req, stop: ["\u0007never", stop] });
    expect(listed.choices[0]!.text).toBe(stopped.choices[0]!.text);
  });

  it("logprobs: OpenAI's object, consistent with the text, the same streamed, the engine's numbers", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const ai = openai(team.apiKey);
    const req = { model: dep.name, prompt: "Once upon a time", max_tokens: 16, seed: 12, logprobs: 3 };
    const done = await ai.completions.create(req);
    const choice = done.choices[0]!;
    expectConsistentLogprobs(choice.logprobs as TextLogprobs, choice.text, 3);
    expect(choice.logprobs!.top_logprobs!.some((t) => Object.keys(t).length === 4 || Object.keys(t).length === 3)).toBe(
      true,
    );
    // The numbers are the engine's (the deployment endpoint's logprobs for the same seed).
    const raw = DeploymentCompletionResponse.parse(
      (await complete(dep, team.modelKey, { prompt: req.prompt, max_tokens: 16, seed: 12, logprobs: 3 })).json,
    );
    expect(choice.logprobs!.token_logprobs).toEqual(raw.result[0]!.logprobs!.map((l) => l.logprob));

    // Streamed: each chunk's logprobs cover its text; together they are the non-streamed object.
    const merged: TextLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
    let text = "";
    for await (const c of await ai.completions.create({ ...req, stream: true })) {
      for (const ch of c.choices) {
        text += ch.text;
        if (ch.finish_reason) continue;
        const lp = ch.logprobs as TextLogprobs;
        expect(lp.tokens.join("")).toBe(ch.text);
        for (const key of ["tokens", "token_logprobs", "top_logprobs", "text_offset"] as const)
          (merged[key] as unknown[]).push(...lp[key]);
      }
    }
    expect(text).toBe(choice.text);
    expect(merged).toEqual(choice.logprobs);

    // logprobs: 0 is the chosen token alone; with a stop string the tokens still spell the text.
    const zero = await ai.completions.create({ ...req, logprobs: 0 });
    expectConsistentLogprobs(zero.choices[0]!.logprobs as TextLogprobs, zero.choices[0]!.text, 0);
    const stop = choice.text.slice(6, 9);
    const stopped = await ai.completions.create({ ...req, stop: [stop] });
    expect(stopped.choices[0]!.finish_reason).toBe("stop");
    expectConsistentLogprobs(stopped.choices[0]!.logprobs as TextLogprobs, stopped.choices[0]!.text, 3);
    expect(stopped.choices[0]!.logprobs!.tokens!.length).toBeLessThan(choice.logprobs!.tokens!.length);
  });

  it("400 naming the parameter for what it refuses; a model key is 401", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const api = client(team.apiKey);
    const ok = { model: dep.name, prompt: "Hi" };
    const cases: [Record<string, unknown>, string][] = [
      [{ model: undefined }, "model"],
      [{ prompt: undefined }, "prompt"],
      [{ prompt: "" }, "prompt"],
      [{ prompt: ["a", "b"] }, "prompt"],
      [{ prompt: [""] }, "prompt[0]"],
      [{ prompt: [1, 2, 3] }, "prompt"],
      [{ max_tokens: 0 }, "max_tokens"],
      [{ temperature: 1.5 }, "temperature"],
      [{ logprobs: 6 }, "logprobs"],
      [{ logprobs: true }, "logprobs"],
      [{ echo: true, logprobs: 1 }, "echo"],
      [{ best_of: 3 }, "best_of"],
      [{ presence_penalty: 0.5 }, "presence_penalty"],
      [{ suffix: "x" }, "suffix"],
      [{ stream_options: { include_usage: true } }, "stream_options"],
      [{ stream: true, stream_options: { include_usage: true, other: 1 } }, "stream_options.other"],
      [{ stop: [""] }, "stop[0]"],
      [{ n: 17 }, "n"],
    ];
    for (const [patch, param] of cases) {
      const res = await api.post("/v1/completions", { ...ok, ...patch });
      expect(res.status, JSON.stringify(patch)).toBe(400);
      expect(res.json.error.type, JSON.stringify(patch)).toBe("invalid_request");
      expect(res.json.error.param, JSON.stringify(patch)).toBe(param);
    }
    await expectDocumented("POST", "/v1/completions", await api.post("/v1/completions", { ...ok, logprobs: 9 }));
    // What clients send by default is accepted.
    const defaults = { ...ok, best_of: 1, presence_penalty: 0, frequency_penalty: 0, n: 1, logit_bias: {} };
    expect((await api.post("/v1/completions", defaults)).status).toBe(200);
    expect((await client(team.modelKey).post("/v1/completions", ok)).status).toBe(401);
    const ctx = await api.post("/v1/completions", { ...ok, max_tokens: 2048 });
    expect(ctx.status).toBe(400);
    expect(ctx.json.error.type).toBe("context_length_exceeded");
  });

  it("404 naming model for an unknown deployment or another team's, which looks the same", async () => {
    const { team } = await makeTeamWithDeployment();
    const other = await makeTeamWithDeployment();
    const api = client(team.apiKey);
    const answers = [];
    for (const model of [`${team.slug}/nope`, `${other.team.slug}/${other.dep.name}`, other.dep.name]) {
      const res = await api.post("/v1/completions", { model, prompt: "Hi" });
      expect(res.status, model).toBe(404);
      expect(res.json, model).toEqual({ error: { type: "not_found", message: expect.any(String), param: "model" } });
      answers.push(res.json.error.message.replace(model, "M"));
      await expectDocumented("POST", "/v1/completions", res);
    }
    expect(new Set(answers).size).toBe(1);
    await expect(
      openai(team.apiKey).completions.create({ model: `${other.team.slug}/${other.dep.name}`, prompt: "Hi" }),
    ).rejects.toMatchObject({ status: 404 });
  });

  it("counts its tokens in the usage, per key, streamed or not", async () => {
    const team = await makeTeam();
    const dep = await makeDeployment(team);
    const api = client(team.apiKey);
    const ai = openai(team.apiKey);
    const a = await ai.completions.create({ model: dep.name, prompt: "Hello there", max_tokens: 5, seed: 1 });
    let streamedUsage: OpenAI.Completions.CompletionUsage | undefined;
    for await (const c of await ai.completions.create({
      model: dep.name,
      prompt: "Hello",
      max_tokens: 6,
      seed: 2,
      logprobs: 2,
      stream: true,
      stream_options: { include_usage: true },
    }))
      streamedUsage = c.usage ?? streamedUsage;
    const total = {
      requests: 2,
      prompt_tokens: a.usage!.prompt_tokens + streamedUsage!.prompt_tokens,
      completion_tokens: a.usage!.completion_tokens + streamedUsage!.completion_tokens,
    };
    await expect
      .poll(async () => UsageResponse.parse((await api.get("/v1/usage?groupBy=key")).json).data, { timeout: 10_000 })
      .toEqual([{ key: team.keyId, ...total }]);
  });

  it("is bounded by the key's concurrent generations and tokens per minute", async () => {
    const team = await makeTeam();
    const dep = await makeDeployment(team);
    const api = client(team.apiKey);
    await setTeamLimits(db().db, { teamId: team.id, limits: { concurrentStreams: 1, tokensPerMinute: 40 } });
    const open = await fetch(`${baseUrl}/v1/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${team.apiKey}`, "content-type": "application/json" },
      // End of text is banned, so the stream spends more than the 40 tokens (the random model
      // could otherwise stop early).
      body: JSON.stringify({
        model: dep.name,
        prompt: "Once upon a time",
        max_tokens: 200,
        stream: true,
        logit_bias: await noEosBias(),
      }),
    });
    expect(open.status).toBe(200);
    const busy = await api.post("/v1/completions", { model: dep.name, prompt: "Hi", max_tokens: 2 });
    expect(busy.status).toBe(429);
    expect(busy.json.error.message).toMatch(/generations running/);
    await open.text();
    const spent = await api.post("/v1/completions", { model: dep.name, prompt: "Hi", max_tokens: 2 });
    expect(spent.status).toBe(429);
    expect(spent.json.error.message).toMatch(/used its 40 tokens/);
  });
});

describe("another method on the completion paths", () => {
  for (const path of ["/v1/completions", "/v1/chat/completions"])
    it(`${path}: 405 in the error shape, with Allow: POST`, async () => {
      const res = await client((await makeTeam()).apiKey).get(path);
      expect(res.status).toBe(405);
      expect(res.headers.get("allow")).toBe("POST");
      expect(res.json.error.type).toBe("invalid_request");
    });
});

describe("GET /v1/models", () => {
  it("lists the caller's team's deployments as OpenAI model objects, never another team's", async () => {
    const team = await makeTeam();
    const other = await makeTeamWithDeployment();
    const deps = [await makeDeployment(team, "b-model"), await makeDeployment(team, "a-model")];
    const res = await client(team.apiKey).get("/v1/models");
    expect(res.status).toBe(200);
    const list = ModelList.parse(res.json);
    expect(list.data.map((m) => m.id)).toEqual([`${team.slug}/a-model`, `${team.slug}/b-model`]);
    for (const m of list.data) {
      expect(m.owned_by).toBe(team.slug);
      expect(Math.abs(m.created - Date.now() / 1000)).toBeLessThan(600);
    }
    await expectDocumented("GET", "/v1/models", res);

    const models = [];
    for await (const m of openai(team.apiKey).models.list()) models.push(m);
    expect(models.map((m) => m.id).sort()).toEqual(deps.map((d) => `${team.slug}/${d.name}`).sort());
    expect(models.some((m) => m.id.includes(other.team.slug))).toBe(false);
    // Each listed id is usable as `model`.
    const done = await openai(team.apiKey).completions.create({ model: models[0]!.id, prompt: "Hi", max_tokens: 2 });
    expect(done.choices[0]!.text.length).toBeGreaterThanOrEqual(0);

    const theirs = ModelList.parse((await client(other.team.apiKey).get("/v1/models")).json);
    expect(theirs.data.map((m) => m.id)).toEqual([`${other.team.slug}/${other.dep.name}`]);
    expect((await client((await makeTeam()).apiKey).get("/v1/models")).json).toEqual({ object: "list", data: [] });
    expect((await client(team.modelKey).get("/v1/models")).status).toBe(401);
  });

  it("GET /v1/models/{model}: one of the team's, by id (slash or %2F) or bare name; another team's is 404", async () => {
    const team = await makeTeam();
    const other = await makeTeamWithDeployment();
    const dep = await makeDeployment(team, "one");
    const api = client(team.apiKey);
    const listed = ModelList.parse((await api.get("/v1/models")).json).data[0];
    for (const path of [`/v1/models/${team.slug}/one`, `/v1/models/${team.slug}%2Fone`, "/v1/models/one"]) {
      const res = await api.get(path);
      expect(res.status, path).toBe(200);
      expect(res.json, path).toEqual(listed);
      await expectDocumented("GET", "/v1/models/{model}", res);
    }
    expect(await openai(team.apiKey).models.retrieve(`${team.slug}/${dep.name}`)).toMatchObject(listed!);
    for (const path of [`/v1/models/${other.team.slug}/${other.dep.name}`, `/v1/models/${team.slug}/two`]) {
      const res = await api.get(path);
      expect(res.status, path).toBe(404);
      expect(res.json.error).toMatchObject({ type: "not_found", param: "model" });
      await expectDocumented("GET", "/v1/models/{model}", res);
    }
    await expect(openai(team.apiKey).models.retrieve(`${other.team.slug}/${other.dep.name}`)).rejects.toMatchObject({
      status: 404,
    });
    // Decoded once more for the %2F form: a NUL that comes out of it is a 400, as in any path.
    const nul = await api.get("/v1/models/%2500");
    expect(nul.status).toBe(400);
    expect(nul.json.error).toMatchObject({ type: "invalid_request", param: "model" });
  });
});

describe("POST /v1/chat/completions, OpenAI extras", () => {
  it("stream_options.include_usage: a last chunk with empty choices and the non-streamed usage", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const ai = openai(team.apiKey);
    const req = { model: dep.name, messages: [{ role: "user" as const, content: "Hello" }], max_tokens: 12, seed: 3 };
    const whole = await ai.chat.completions.create({ ...req, n: 2 });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    const stream = await ai.chat.completions.create({
      ...req,
      n: 2,
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const c of stream) chunks.push(c);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toMatchObject({
      prompt_tokens: whole.usage!.prompt_tokens,
      completion_tokens: whole.usage!.completion_tokens,
      total_tokens: whole.usage!.total_tokens,
    });
    expect(chunks.slice(0, -1).every((c) => !c.usage)).toBe(true);
    for (const index of [0, 1]) {
      const mine = chunks.flatMap((c) => c.choices).filter((c) => c.index === index);
      expect(mine.map((c) => c.delta.content ?? "").join("")).toBe(whole.choices[index]!.message.content);
      expect(mine.at(-1)!.finish_reason).toBe(whole.choices[index]!.finish_reason);
    }
  });

  it("logprobs / top_logprobs in OpenAI's chat shape, streamed or not", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const ai = openai(team.apiKey);
    const req = {
      model: dep.name,
      messages: [{ role: "user" as const, content: "Tell me a story" }],
      max_tokens: 14,
      seed: 8,
      logprobs: true,
      top_logprobs: 2,
    };
    const res = await client(team.apiKey).post("/v1/chat/completions", req);
    expect(res.status, res.text).toBe(200);
    const done = ChatCompletionResponse.parse(res.json);
    const content = done.choices[0]!.logprobs!.content;
    expect(content.map((t) => t.token).join("")).toBe(done.choices[0]!.message.content);
    for (const t of content) {
      expect(t.logprob).toBeLessThanOrEqual(0);
      expect(t.bytes).toEqual([...Buffer.from(t.token, "utf8")]);
      expect(t.top_logprobs).toHaveLength(2);
      expect(t.top_logprobs[0]!.logprob).toBeGreaterThanOrEqual(t.top_logprobs[1]!.logprob);
      expect(t.top_logprobs[0]!.logprob).toBeGreaterThanOrEqual(t.logprob - 1e-9);
    }
    const plain = await ai.chat.completions.create({ ...req, logprobs: undefined, top_logprobs: undefined });
    expect(plain.choices[0]!.logprobs).toBeNull();
    expect(plain.choices[0]!.message.content).toBe(done.choices[0]!.message.content);

    const streamed: typeof content = [];
    const events = await rawStream(team.apiKey, "/v1/chat/completions", req);
    for (const e of events.map((c) => ChatCompletionChunk.parse(c)))
      for (const c of e.choices) if (c.logprobs) streamed.push(...c.logprobs.content);
    expect(streamed).toEqual(content);
    let viaClient = 0;
    for await (const c of await ai.chat.completions.create({ ...req, stream: true }))
      viaClient += c.choices[0]?.logprobs?.content?.length ?? 0;
    expect(viaClient).toBe(content.length);

    const bare = await client(team.apiKey).post("/v1/chat/completions", { ...req, logprobs: undefined });
    expect(bare.status).toBe(400);
    expect(bare.json.error.param).toBe("top_logprobs");
    const many = await client(team.apiKey).post("/v1/chat/completions", { ...req, top_logprobs: 6 });
    expect(many.json.error.param).toBe("top_logprobs");
  });
});
