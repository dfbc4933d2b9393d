// Capture (docs/api.md "Capture"): completions recorded into pipelines, opted in per request by
// the X-Pipeline-* headers or the `pipeline` body field, on the hosted chat API (raw HTTP and the
// official OpenAI client) and the deployment endpoints; feedback with PATCH /v1/samples/:id.
import OpenAI from "openai";
import { eq, sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { ChatCompletionResponse } from "@/lib/contracts/chat-completions";
import { DeploymentCompletionResponse, StreamEndEvent } from "@/lib/contracts/deployments";
import { GenerationFactsSchema } from "@/lib/contracts/capture";
import { SampleSchema } from "@/lib/contracts/pipelines";
import { teams } from "@/lib/db/schema";
import { createApiKey } from "@/lib/services/api-keys";
import { storableText } from "@/lib/contracts/text";
import { baseUrl, client, db, makeTeam, type TestTeam } from "../helpers/context";
import { complete, makeDeployment, noEosBias, parseSse, type TestDeployment } from "../helpers/deployments";
import { download, parseLines, waitForStatus } from "../helpers/datasets";
import { expectDocumented } from "../helpers/openapi";

const openai = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${baseUrl}/v1`, maxRetries: 0 });

/** The spec's sample fields, exactly: capture adds none to the API's answers. */
const SAMPLE_FIELDS = ["createdAt", "groupId", "id", "length", "metadata", "pipelineId", "teamId", "url", "userId"];

async function setup() {
  const team = await makeTeam();
  const dep = await makeDeployment(team);
  const api = client(team.apiKey);
  const res = await api.post("/v1/pipelines/create", { name: "captured" });
  expect(res.status, res.text).toBe(200);
  return { team, dep, api, pipelineId: res.json.id as string };
}

type Listed = { id: string; userId: string | null; groupId: string | null; metadata: Record<string, string> | null };

/** The pipeline's samples (in selection order), through the API. */
async function listSamples(
  team: TestTeam,
  pipelineId: string,
  filter: Record<string, unknown> = {},
): Promise<Listed[]> {
  const res = await client(team.apiKey).post(`/v1/pipelines/${pipelineId}/samples`, filter);
  expect(res.status, res.text).toBe(200);
  return res.json;
}

/** Waits until the pipeline holds `n` samples (captures are written after the answer). */
async function samplesSoon(team: TestTeam, pipelineId: string, n: number): Promise<Listed[]> {
  await expect
    .poll(async () => (await listSamples(team, pipelineId)).length, { timeout: 15_000, interval: 50 })
    .toBe(n);
  return listSamples(team, pipelineId);
}

/** A sample's messages from its signed URL, and its generation facts from the database. */
async function contentOf(sample: { url?: string; id: string }) {
  const listed = sample as { url: string; id: string };
  const messages = await (await fetch(listed.url)).json();
  const [row] = await db().db.execute<{ generation: unknown }>(
    sql`select generation from samples where id = ${listed.id}`,
  );
  return { messages, generation: GenerationFactsSchema.parse(row!.generation) };
}

/** The app's completion counter for this deployment: every status, summed (0 when never seen). */
async function generations(team: TestTeam, dep: TestDeployment): Promise<number> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const label = `deployment="${team.slug}/${dep.name}"`;
  return text
    .split("\n")
    .filter((l) => l.startsWith("lmp_generation_requests_total{") && l.includes(label))
    .reduce((sum, l) => sum + Number(l.split(" ").at(-1)), 0);
}

/** Waits until the deployment's one completion has ended, and checks it did not finish. */
async function generationStopped(team: TestTeam, dep: TestDeployment) {
  await expect.poll(() => generations(team, dep), { timeout: 10_000 }).toBe(1);
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const line = text
    .split("\n")
    .find((l) => l.startsWith("lmp_generation_requests_total{") && l.includes(`"${team.slug}/${dep.name}"`));
  // Cancelled, or (a deployment stream whose upstream request was aborted first) error: not ok.
  expect(line).toMatch(/status="(cancelled|error)"/);
}

const chat = (team: TestTeam, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  client(team.apiKey).post("/v1/chat/completions", body, headers);

describe("capture on POST /v1/chat/completions", () => {
  it("header form: stores the messages and the reply exactly, with the labels, and answers as usual", async () => {
    const { team, dep, pipelineId } = await setup();
    const messages = [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Where is the bridge? ünïcödé" },
    ];
    const res = await chat(
      team,
      { model: dep.name, messages, max_tokens: 12, temperature: 0 },
      {
        "X-Pipeline-Id": pipelineId,
        "X-Pipeline-User-Id": "user-7",
        "X-Pipeline-Group-Id": "conv-1",
        "X-Pipeline-Metadata": JSON.stringify({ app: "support", lang: "\u00e9n" }),
      },
    );
    expect(res.status, res.text).toBe(200);
    const body = ChatCompletionResponse.parse(res.json); // strict: no field added
    const [sample] = await samplesSoon(team, pipelineId, 1);
    expect(Object.keys(sample!).sort()).toEqual(SAMPLE_FIELDS);
    expect(SampleSchema.parse(sample)).toMatchObject({
      userId: "user-7",
      groupId: "conv-1",
      metadata: { app: "support", lang: "én" },
      length: 3,
    });
    const { messages: stored, generation } = await contentOf(sample!);
    expect(stored).toEqual([...messages, { role: "assistant", content: body.choices[0]!.message.content }]);
    expect(generation).toMatchObject({
      endpoint: "chat.completions",
      deployment: `${team.slug}/${dep.name}`,
      finishReason: body.choices[0]!.finish_reason,
      promptTokens: body.usage.prompt_tokens,
      completionTokens: body.usage.completion_tokens,
      index: 0,
      n: 1,
      streamed: false,
      keyId: team.keyId,
    });
    expect(generation.latencyMs).toBeGreaterThan(0);
    expect(res.headers.get("x-request-id")).toBe(generation.requestId);
  });

  it("body form with a prompt and n: one sample per choice, the prompt as the user message", async () => {
    const { team, dep, pipelineId } = await setup();
    const res = await chat(team, {
      model: `${team.slug}/${dep.name}`,
      prompt: "Once upon a time",
      n: 3,
      max_tokens: 8,
      seed: 5,
      pipeline: { id: pipelineId, userId: "u1", metadata: { exp: "a" } },
    });
    expect(res.status, res.text).toBe(200);
    const body = ChatCompletionResponse.parse(res.json);
    const samples = await samplesSoon(team, pipelineId, 3);
    const byIndex = new Map<number, unknown>();
    for (const s of samples) {
      expect(s).toMatchObject({ userId: "u1", groupId: null, metadata: { exp: "a" } });
      const { messages, generation } = await contentOf(s);
      byIndex.set(generation.index, messages);
      expect(generation.n).toBe(3);
    }
    for (const c of body.choices)
      expect(byIndex.get(c.index)).toEqual([
        { role: "user", content: "Once upon a time" },
        { role: "assistant", content: c.message.content },
      ]);
  });

  it("through the OpenAI client, streamed and not, by the body field and by headers", async () => {
    const { team, dep, pipelineId } = await setup();
    const ai = openai(team.apiKey);
    const messages = [{ role: "user" as const, content: "Say something" }];
    const done = await ai.chat.completions.create({
      model: dep.name,
      messages,
      max_tokens: 10,
      temperature: 0,
      // An extra body field: the client sends it as given.
      ...({ pipeline: { id: pipelineId, metadata: { via: "sdk" } } } as object),
    });
    const stream = await ai.chat.completions.create(
      { model: dep.name, messages, max_tokens: 10, temperature: 0, stream: true },
      { headers: { "X-Pipeline-Id": pipelineId, "X-Pipeline-Metadata": '{"via":"sdk-stream"}' } },
    );
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    expect(text).toBe(done.choices[0]!.message.content);

    const samples = await samplesSoon(team, pipelineId, 2);
    const facts = await Promise.all(samples.map(contentOf));
    expect(samples.map((s) => s.metadata!.via).sort()).toEqual(["sdk", "sdk-stream"]);
    for (const { messages: stored } of facts)
      expect(stored).toEqual([...messages, { role: "assistant", content: text }]);
    const streamed = facts.find((f) => f.generation.streamed)!.generation;
    expect(streamed.ttftMs).toBeGreaterThan(0);
    expect(streamed.completionTokens).toBe(done.usage!.completion_tokens);
    expect(streamed.finishReason).toBe(done.choices[0]!.finish_reason);
  });

  it("refuses an unknown pipeline or another team's with 404 naming it, before generating anything", async () => {
    const { team, dep } = await setup();
    const other = await setup();
    const ai = openai(team.apiKey);
    for (const id of [other.pipelineId, "pipe_unknown"]) {
      const byBody = await chat(team, { model: dep.name, prompt: "Hi", pipeline: { id } });
      expect(byBody.status, byBody.text).toBe(404);
      expect(byBody.json.error).toMatchObject({ type: "not_found", param: "pipeline.id" });
      await expectDocumented("POST", "/v1/chat/completions", byBody);
      const byHeader = await chat(team, { model: dep.name, prompt: "Hi", stream: true }, { "X-Pipeline-Id": id });
      expect(byHeader.status, byHeader.text).toBe(404);
      expect(byHeader.json.error).toMatchObject({ type: "not_found", param: "X-Pipeline-Id" });
      await expect(
        ai.chat.completions.create(
          { model: dep.name, messages: [{ role: "user", content: "Hi" }], stream: true },
          {
            headers: { "X-Pipeline-Id": id },
          },
        ),
      ).rejects.toMatchObject({ status: 404 });
    }
    // Nothing was generated (the deployment has no completion at all), nothing stored anywhere.
    expect(await generations(team, dep)).toBe(0);
    expect(await listSamples(other.team, other.pipelineId)).toEqual([]);
    // A deleted pipeline is unknown too.
    const gone = await setup();
    expect((await gone.api.call("DELETE", `/v1/pipelines/${gone.pipelineId}`)).status).toBe(200);
    const res = await chat(gone.team, { model: gone.dep.name, prompt: "Hi" }, { "X-Pipeline-Id": gone.pipelineId });
    expect(res.status).toBe(404);
    expect(await generations(gone.team, gone.dep)).toBe(0);
    // Without capture the same deployment answers (so the counter above does count).
    expect((await chat(team, { model: dep.name, prompt: "Hi", max_tokens: 2 })).status).toBe(200);
    await expect.poll(() => generations(team, dep)).toBe(1);
  });

  it("validates the capture like add: 400 naming the field or the header", async () => {
    const { team, dep, pipelineId } = await setup();
    const base = { model: dep.name, prompt: "Hi", max_tokens: 2 };
    const cases: [Record<string, unknown>, Record<string, string>, string][] = [
      [{ pipeline: { id: pipelineId, metadata: { n: 1 } } }, {}, "pipeline.metadata.n"],
      [{ pipeline: { id: pipelineId, userId: "x".repeat(257) } }, {}, "pipeline.userId"],
      [{ pipeline: { id: pipelineId, extra: 1 } }, {}, "pipeline.extra"],
      [{ pipeline: {} }, {}, "pipeline.id"],
      [{}, { "X-Pipeline-Id": pipelineId, "X-Pipeline-Metadata": "{not json" }, "X-Pipeline-Metadata"],
      [{}, { "X-Pipeline-Id": pipelineId, "X-Pipeline-Metadata": '["a"]' }, "X-Pipeline-Metadata"],
      [{}, { "X-Pipeline-Id": pipelineId, "X-Pipeline-Metadata": '{"k":2}' }, "X-Pipeline-Metadata"],
      [{}, { "X-Pipeline-Id": pipelineId, "X-Pipeline-Group-Id": "g".repeat(300) }, "X-Pipeline-Group-Id"],
      [{}, { "X-Pipeline-User-Id": "u" }, "X-Pipeline-Id"],
      // Both forms at once: refused, never a silent choice.
      [{ pipeline: { id: pipelineId } }, { "X-Pipeline-Id": pipelineId }, "pipeline"],
    ];
    for (const [extra, headers, param] of cases) {
      const res = await chat(team, { ...base, ...extra }, headers);
      expect(res.status, `${param}: ${res.text}`).toBe(400);
      expect(res.json.error).toMatchObject({ type: "invalid_request", param });
    }
    const many = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, "v"]));
    const res = await chat(team, base, { "X-Pipeline-Id": pipelineId, "X-Pipeline-Metadata": JSON.stringify(many) });
    expect(res.status).toBe(400);
    expect(await generations(team, dep)).toBe(0);
    expect(await listSamples(team, pipelineId)).toEqual([]);
  });

  it("48 concurrent captured completions, streamed and not, give 48 samples", async () => {
    const { team, dep, pipelineId } = await setup();
    // 48 at once is past the default of 32 generations per key.
    await db()
      .db.update(teams)
      .set({ limits: { concurrentStreams: 64 } })
      .where(eq(teams.id, team.id));
    const results = await Promise.all(
      Array.from({ length: 48 }, async (_, i) => {
        const streamed = i % 2 === 1;
        const res = await fetch(`${baseUrl}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${team.apiKey}`, "content-type": "application/json" },
          body: JSON.stringify({
            model: dep.name,
            messages: [{ role: "user", content: `request ${i}` }],
            max_tokens: 6,
            stream: streamed,
            pipeline: { id: pipelineId, groupId: `g${i}` },
          }),
        });
        expect(res.status).toBe(200);
        const text = await res.text();
        if (!streamed) return { i, content: ChatCompletionResponse.parse(JSON.parse(text)).message.content };
        const content = parseSse(text)
          .filter((e) => e.data !== "[DONE]")
          .map((e) => JSON.parse(e.data).choices[0]?.delta?.content ?? "")
          .join("");
        return { i, content };
      }),
    );
    const samples = await samplesSoon(team, pipelineId, 48);
    await new Promise((r) => setTimeout(r, 300));
    expect(await listSamples(team, pipelineId)).toHaveLength(48); // and no more
    const byGroup = new Map(samples.map((s) => [s.groupId, s]));
    for (const { i, content } of results.filter((r) => r.i % 8 === 0 || r.i % 8 === 1)) {
      const { messages } = await contentOf(byGroup.get(`g${i}`)!);
      // Unseeded, a reply may hold a NUL (the tiny model has a token for each byte): it is stored as U+FFFD.
      expect(messages).toEqual([
        { role: "user", content: `request ${i}` },
        { role: "assistant", content: storableText(content) },
      ]);
    }
  });

  it("stores nothing for a stream the client abandons", async () => {
    const { team, dep, pipelineId } = await setup();
    const controller = new AbortController();
    const res = await fetch(`${baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${team.apiKey}`,
        "content-type": "application/json",
        "X-Pipeline-Id": pipelineId,
      },
      // Greedy: this prompt runs to max_tokens on the tiny model (see deployments-stream.test.ts).
      body: JSON.stringify({
        model: dep.name,
        prompt: "The city was quiet",
        max_tokens: 1000,
        temperature: 0,
        stream: true,
      }),
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    for (let i = 0; i < 3; i++) await reader.read();
    controller.abort();
    await generationStopped(team, dep);
    await new Promise((r) => setTimeout(r, 500));
    expect(await listSamples(team, pipelineId)).toEqual([]);
  });
});

describe("capture on POST /v1/completions", () => {
  it("through the OpenAI client: body field with echo and n, headers on a stream; stored like a deployment's", async () => {
    const { team, dep, pipelineId } = await setup();
    const ai = openai(team.apiKey);
    const prompt = "The old man";
    const done = await ai.completions.create({
      model: `${team.slug}/${dep.name}`,
      prompt,
      max_tokens: 8,
      seed: 5,
      n: 2,
      echo: true,
      ...({ pipeline: { id: pipelineId, groupId: "g1", metadata: { via: "sdk" } } } as object),
    });
    const stream = await ai.completions.create(
      { model: `${team.slug}/${dep.name}`, prompt, max_tokens: 8, seed: 5, stream: true },
      { headers: { "X-Pipeline-Id": pipelineId, "X-Pipeline-Metadata": '{"via":"sdk-stream"}' } },
    );
    let streamed = "";
    for await (const chunk of stream) streamed += chunk.choices[0]?.text ?? "";

    const samples = await samplesSoon(team, pipelineId, 3);
    const stored = await Promise.all(samples.map(async (s) => ({ s, ...(await contentOf(s)) })));
    const fromBody = stored.filter((x) => x.s.metadata!.via === "sdk");
    expect(fromBody).toHaveLength(2);
    for (const { s, messages, generation } of fromBody) {
      const choice = done.choices.find((c) => c.index === generation.index)!;
      expect(choice.text.startsWith(prompt)).toBe(true); // echo: the prompt is not stored twice
      expect(messages).toEqual([
        { role: "user", content: prompt },
        { role: "assistant", content: choice.text.slice(prompt.length) },
      ]);
      expect(generation).toMatchObject({
        endpoint: "completions",
        streamed: false,
        finishReason: choice.finish_reason,
      });
      expect(s.groupId).toBe("g1");
    }
    const [fromStream] = stored.filter((x) => x.s.metadata!.via === "sdk-stream");
    expect(fromStream!.messages).toEqual([
      { role: "user", content: prompt },
      { role: "assistant", content: streamed },
    ]);
    expect(fromStream!.generation).toMatchObject({ endpoint: "completions", streamed: true });
  });

  it("refuses an unknown or another team's pipeline with 404 before generating", async () => {
    const { team, dep } = await setup();
    const other = await setup();
    for (const id of [other.pipelineId, "pipe_unknown"]) {
      const res = await client(team.apiKey).post("/v1/completions", {
        model: dep.name,
        prompt: "Hi",
        pipeline: { id },
      });
      expect(res.status, res.text).toBe(404);
      expect(res.json.error).toMatchObject({ type: "not_found", param: "pipeline.id" });
      await expectDocumented("POST", "/v1/completions", res);
    }
    expect(await generations(team, dep)).toBe(0);
    expect(await listSamples(other.team, other.pipelineId)).toEqual([]);
  });
});

describe("capture on the deployment endpoints", () => {
  it("POST: body form, with echo and n, prompt and completion stored exactly", async () => {
    const { team, dep, pipelineId } = await setup();
    const req = { prompt: "The old man", max_tokens: 8, seed: 3, n: 2, echo: true, stop: [" the"] };
    const res = await complete(dep, team.modelKey, { ...req, pipeline: { id: pipelineId, userId: "dev" } });
    expect(res.status, res.text).toBe(200);
    const body = DeploymentCompletionResponse.parse(res.json);
    const samples = await samplesSoon(team, pipelineId, 2);
    for (const s of samples) {
      const { messages, generation } = await contentOf(s);
      const item = body.result.find((r) => r.index === generation.index)!;
      expect(item.completion.startsWith(req.prompt)).toBe(true); // echo
      expect(messages).toEqual([
        { role: "user", content: req.prompt },
        { role: "assistant", content: item.completion.slice(req.prompt.length) },
      ]);
      expect(generation).toMatchObject({
        endpoint: "deployment",
        deployment: `${team.slug}/${dep.name}`,
        finishReason: item.finish_reason,
        stop: item.stop,
        promptTokens: body.usage.prompt_tokens,
        completionTokens: body.usage.completion_tokens,
        streamed: false,
        keyId: team.modelKeyId,
      });
      expect(s.userId).toBe("dev");
    }
  });

  it("POST stream: header form; stored when it finishes", async () => {
    const { team, dep, pipelineId } = await setup();
    const res = await fetch(dep.url, {
      method: "POST",
      headers: {
        authorization: `Bearer ${team.modelKey}`,
        "content-type": "application/json",
        "X-Pipeline-Id": pipelineId,
        "X-Pipeline-Metadata": '{"source":"stream"}',
      },
      body: JSON.stringify({ prompt: "Hi there", max_tokens: 10, seed: 1, stream: true }),
    });
    expect(res.status).toBe(200);
    const events = parseSse(await res.text());
    expect(events.at(-1)!.data).toBe("[DONE]");
    const text = events
      .slice(0, -1)
      .map((e) => JSON.parse(e.data))
      .filter((c) => "completion" in c)
      .map((c) => c.completion)
      .join("");
    const [sample] = await samplesSoon(team, pipelineId, 1);
    expect(sample!.metadata).toEqual({ source: "stream" });
    const { messages, generation } = await contentOf(sample!);
    expect(messages).toEqual([
      { role: "user", content: "Hi there" },
      { role: "assistant", content: text },
    ]);
    expect(generation.streamed).toBe(true);
  });

  it("GET stream: header form; an unknown pipeline is a 404 before any event", async () => {
    const { team, dep, pipelineId } = await setup();
    const q = new URLSearchParams({ prompt: "Tell me", max_tokens: "6", seed: "2" });
    const get = (id: string) =>
      fetch(`${dep.url}?${q}`, {
        headers: { authorization: `Bearer ${team.modelKey}`, "X-Pipeline-Id": id, "X-Pipeline-Group-Id": "g" },
      });
    const res = await get(pipelineId);
    expect(res.status).toBe(200);
    const events = parseSse(await res.text());
    const text = events
      .filter((e) => e.event === "update")
      .map((e) => JSON.parse(e.data).completion)
      .join("");
    const end = StreamEndEvent.parse(JSON.parse(events.find((e) => e.event === "end")!.data));
    const [sample] = await samplesSoon(team, pipelineId, 1);
    expect(sample!.groupId).toBe("g");
    const { messages, generation } = await contentOf(sample!);
    expect(messages).toEqual([
      { role: "user", content: "Tell me" },
      { role: "assistant", content: text },
    ]);
    expect(generation.finishReason).toBe((end as { finish_reason: string }).finish_reason);

    const before = await generations(team, dep);
    const refused = await get("pipe_nope");
    expect(refused.status).toBe(404);
    expect((await refused.json()).error).toMatchObject({ type: "not_found", param: "X-Pipeline-Id" });
    expect(await generations(team, dep)).toBe(before);
  });

  it("a model key captures only into the pipelines of its scope: 403 elsewhere, unknown ids alike, before generating", async () => {
    const { team, dep, api, pipelineId } = await setup();
    const other = (await api.post("/v1/pipelines/create", { name: "not for this key" })).json.id as string;
    const scoped = await createApiKey(db().db, {
      teamId: team.id,
      kind: "model",
      capturePipelines: [pipelineId],
    });
    const none = await createApiKey(db().db, { teamId: team.id, kind: "model", capturePipelines: [] });
    const before = await generations(team, dep);
    // Another pipeline of the team, and one that does not exist: the same answer (the key's holder
    // learns nothing of the team's pipelines).
    for (const id of [other, "pipe_nope"]) {
      const res = await complete(dep, scoped.secret, { prompt: "Hi", max_tokens: 4, pipeline: { id } });
      expect(res.status, res.text).toBe(403);
      expect(res.json.error).toMatchObject({ type: "forbidden", param: "pipeline.id" });
      expect(res.json.error.message).toContain(pipelineId);
    }
    const q = new URLSearchParams({ prompt: "Hi", max_tokens: "4" });
    const refused = await fetch(`${dep.url}?${q}`, {
      headers: { authorization: `Bearer ${none.secret}`, "X-Pipeline-Id": pipelineId },
    });
    expect(refused.status).toBe(403);
    expect((await refused.json()).error).toMatchObject({ type: "forbidden", param: "X-Pipeline-Id" });
    expect(await generations(team, dep)).toBe(before);
    // Without a capture, the scope changes nothing; inside it, the sample says which key wrote it.
    expect((await complete(dep, none.secret, { prompt: "Hi", max_tokens: 4 })).status).toBe(200);
    const ok = await complete(dep, scoped.secret, { prompt: "Hi", max_tokens: 4, pipeline: { id: pipelineId } });
    expect(ok.status, ok.text).toBe(200);
    const [sample] = await samplesSoon(team, pipelineId, 1);
    expect((await contentOf(sample!)).generation.keyId).toBe(scoped.key.id);
    expect(await listSamples(team, other)).toEqual([]);
  });

  it("lets browsers send the capture headers (CORS preflight)", async () => {
    const { dep } = await setup();
    const pre = await fetch(dep.url, {
      method: "OPTIONS",
      headers: {
        origin: "https://example.org",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type, x-pipeline-id, x-pipeline-metadata",
      },
    });
    expect(pre.status).toBe(204);
    const allowed = pre.headers.get("access-control-allow-headers")!.split(/,\s*/);
    for (const h of ["x-pipeline-id", "x-pipeline-user-id", "x-pipeline-group-id", "x-pipeline-metadata"])
      expect(allowed).toContain(h);
  });

  it("POST stream abandoned by the client stores nothing", async () => {
    const { team, dep, pipelineId } = await setup();
    const controller = new AbortController();
    const res = await fetch(dep.url, {
      method: "POST",
      headers: { authorization: `Bearer ${team.modelKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        prompt: "The city was quiet",
        max_tokens: 1000,
        logit_bias: await noEosBias(),
        stream: true,
        pipeline: { id: pipelineId },
      }),
      signal: controller.signal,
    });
    const reader = res.body!.getReader();
    for (let i = 0; i < 3; i++) await reader.read();
    controller.abort();
    await generationStopped(team, dep);
    await new Promise((r) => setTimeout(r, 500));
    expect(await listSamples(team, pipelineId)).toEqual([]);
  });
});

describe("selections on generation facts", () => {
  it("keep the captured completions that finished, one key's or one deployment's, or the added ones; and datasets too", async () => {
    const team = await makeTeam();
    const api = client(team.apiKey);
    const pipelineId = (await api.post("/v1/pipelines/create", { name: "facts" })).json.id as string;
    const facts = (over: Record<string, unknown>) =>
      JSON.stringify({
        endpoint: "deployment",
        deployment: `${team.slug}/chat`,
        deploymentId: "dep_x",
        model: "m",
        index: 0,
        n: 1,
        finishReason: "stop",
        stop: null,
        promptTokens: 3,
        completionTokens: 5,
        latencyMs: 1,
        streamed: false,
        requestId: "req_x",
        ...over,
      });
    const rows: [string, string | null][] = [
      ["smp_gf1", facts({ keyId: "key_a" })],
      ["smp_gf2", facts({ keyId: "key_a", finishReason: "length" })],
      ["smp_gf3", facts({ keyId: "key_b", deployment: `${team.slug}/other` })],
      ["smp_gf4", null],
    ];
    for (const [i, [id, generation]] of rows.entries())
      await db().db.execute(sql`insert into samples (id, pipeline_id, team_id, messages, length, generation, created_at)
        values (${`${id}${team.slug}`}, ${pipelineId}, ${team.id},
          ${JSON.stringify([
            { role: "user", content: `q${i}` },
            { role: "assistant", content: `a${i}` },
          ])}::jsonb, 2,
          ${generation}::jsonb, now() + ${`${i} milliseconds`}::interval)`);
    const ids = async (generation: Record<string, unknown>) => {
      const res = await api.post(`/v1/pipelines/${pipelineId}/samples`, { generation });
      expect(res.status, res.text).toBe(200);
      return (res.json as { id: string }[]).map((x) => x.id.replace(team.slug, ""));
    };
    const count = async (generation: Record<string, unknown>) =>
      (await api.post(`/v1/pipelines/${pipelineId}/count`, { generation })).json.count;
    expect(await ids({ finishReason: "stop" })).toEqual(["smp_gf1", "smp_gf3"]);
    expect(await ids({ finishReason: "length" })).toEqual(["smp_gf2"]);
    expect(await ids({ captured: true })).toEqual(["smp_gf1", "smp_gf2", "smp_gf3"]);
    expect(await ids({ captured: false })).toEqual(["smp_gf4"]);
    expect(await ids({ keyId: "key_a" })).toEqual(["smp_gf1", "smp_gf2"]);
    expect(await ids({ deployment: `${team.slug}/other` })).toEqual(["smp_gf3"]);
    expect(await ids({})).toHaveLength(4);
    expect(await count({ finishReason: "stop", keyId: "key_a" })).toBe(1);
    expect(await count({ captured: false })).toBe(1);
    const bad = await api.post(`/v1/pipelines/${pipelineId}/samples`, { generation: { finishReason: "maybe" } });
    expect(bad.status).toBe(400);
    expect(bad.json.error.param).toBe("generation.finishReason");
    // A dataset of the finished completions only.
    const created = await api.post(`/v1/pipelines/${pipelineId}/create-dataset`, {
      name: "finished",
      filter: { generation: { finishReason: "stop" } },
    });
    expect(created.status, created.text).toBe(200);
    const ready = await waitForStatus(api, created.json.id, "READY");
    expect(ready.size).toBe(2);
    expect(parseLines(await download(api, created.json.id))).toEqual([
      {
        messages: [
          { role: "user", content: "q0" },
          { role: "assistant", content: "a0" },
        ],
      },
      {
        messages: [
          { role: "user", content: "q2" },
          { role: "assistant", content: "a2" },
        ],
      },
    ]);
    // What one key wrote, deleted with the same filter; an empty one filters nothing (400).
    const none = await api.post(`/v1/pipelines/${pipelineId}/delete-samples`, { generation: {} });
    expect(none.status).toBe(400);
    const deleted = await api.post(`/v1/pipelines/${pipelineId}/delete-samples`, { generation: { keyId: "key_a" } });
    expect(deleted.json).toEqual({ deleted: 2 });
    expect(await ids({})).toEqual(["smp_gf3", "smp_gf4"]);
  });
});

describe("PATCH /v1/samples/:id (feedback)", () => {
  it("merges labels into a captured sample's metadata; selections filter on them at once", async () => {
    const { team, dep, pipelineId, api } = await setup();
    for (const user of ["a", "b"])
      expect(
        (
          await chat(team, {
            model: dep.name,
            prompt: "Rate me",
            max_tokens: 4,
            pipeline: { id: pipelineId, userId: user, metadata: { app: "x", mood: "calm" } },
          })
        ).status,
      ).toBe(200);
    const samples = await samplesSoon(team, pipelineId, 2);
    const target = samples.find((s) => s.userId === "a")!;

    const res = await api.call("PATCH", `/v1/samples/${target.id}`, { metadata: { rating: "good", mood: "happy" } });
    expect(res.status, res.text).toBe(200);
    expect(Object.keys(res.json).sort()).toEqual(SAMPLE_FIELDS);
    expect(res.json).toMatchObject({ id: target.id, metadata: { app: "x", mood: "happy", rating: "good" } });
    await expectDocumented("PATCH", "/v1/samples/{id}", res);

    const rated = await listSamples(team, pipelineId, { metadata: { rating: "good" } });
    expect(rated.map((s) => s.id)).toEqual([target.id]);
    expect(await listSamples(team, pipelineId, { metadata: { mood: "calm" } })).toHaveLength(1);
    expect((await listSamples(team, pipelineId, { metadata: { mood: "happy" } })).map((s) => s.id)).toEqual([
      target.id,
    ]);
    const count = await api.post(`/v1/pipelines/${pipelineId}/count`, { metadata: { rating: { $exists: true } } });
    expect(count.json).toEqual({ count: 1 });

    // A second patch merges again; the content is untouched.
    const again = await api.call("PATCH", `/v1/samples/${target.id}`, { metadata: { rating: "bad" } });
    expect(again.json.metadata).toEqual({ app: "x", mood: "happy", rating: "bad" });
    expect(await listSamples(team, pipelineId, { metadata: { rating: "good" } })).toEqual([]);
    expect((await contentOf({ ...target, url: again.json.url })).messages[0]).toEqual({
      role: "user",
      content: "Rate me",
    });

    // Deleting it removes its labels too (deletion reads the merged metadata).
    expect((await api.call("DELETE", `/v1/samples/${target.id}`)).status).toBe(200);
    expect(await listSamples(team, pipelineId, { metadata: { rating: { $exists: true } } })).toEqual([]);
  });

  it("404 for an unknown or another team's sample; 400 for bad labels, with add's limits", async () => {
    const { pipelineId, api } = await setup();
    const added = await api.post(`/v1/pipelines/${pipelineId}/add`, {
      messages: [{ role: "user", content: "hi" }],
      metadata: Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`k${i}`, "v"])),
    });
    expect(added.status, added.text).toBe(200);
    const id = added.json.id as string;
    const other = await makeTeam();
    const foreign = await client(other.apiKey).call("PATCH", `/v1/samples/${id}`, { metadata: { a: "b" } });
    expect(foreign.status).toBe(404);
    expect(foreign.json.error).toMatchObject({ type: "not_found", param: "id" });
    await expectDocumented("PATCH", "/v1/samples/{id}", foreign);
    expect((await api.call("PATCH", "/v1/samples/sample_nope", { metadata: { a: "b" } })).status).toBe(404);

    for (const [body, param] of [
      [{ metadata: { a: 1 } }, "metadata.a"],
      [{ metadata: { a: "x".repeat(513) } }, "metadata.a"],
      [{}, "metadata"],
      [{ metadata: {}, other: 1 }, "other"],
    ] as const) {
      const res = await api.call("PATCH", `/v1/samples/${id}`, body);
      expect(res.status, res.text).toBe(400);
      expect(res.json.error.param).toBe(param);
      await expectDocumented("PATCH", "/v1/samples/{id}", res);
    }
    // 60 keys + 5 new ones would be 65: over add's 64.
    const over = await api.call("PATCH", `/v1/samples/${id}`, {
      metadata: Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`n${i}`, "v"])),
    });
    expect(over.status).toBe(400);
    expect(over.json.error.param).toBe("metadata");
    // Replacing existing keys keeps the count: allowed.
    const ok = await api.call("PATCH", `/v1/samples/${id}`, { metadata: { k0: "w", n0: "v" } });
    expect(ok.status, ok.text).toBe(200);
    expect(Object.keys(ok.json.metadata)).toHaveLength(61);
  });
});
