// Upstream deployments over real sockets: (1) the platform's own OpenAI-compatible endpoint
// serving the tiny model as the upstream of a second team's deployment, through every endpoint;
// (2) a local server speaking each kind's dialect (tests/helpers/fake-upstream.ts) for the
// parameter mapping, refusals, failover, relayed errors, timeouts and the stored key.
import { EventSource } from "eventsource";
import OpenAI from "openai";
import { eq } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { ChatCompletionResponse } from "@/lib/contracts/chat-completions";
import {
  DeploymentCompletionResponse,
  DeploymentStreamChunk,
  StreamEndEvent,
  StreamUpdateEvent,
} from "@/lib/contracts/deployments";
import { CompletionsResponse } from "@/lib/contracts/openai";
import { UsageResponse } from "@/lib/contracts/usage";
import type { UpstreamKind } from "@/lib/contracts/upstream";
import { deployments, workers } from "@/lib/db/schema";
import { randomToken } from "@/lib/ids";
import { seal } from "@/lib/secret-box";
import { createDeployment } from "@/lib/services/deployments";
import { createApiKey } from "@/lib/services/api-keys";
import { setTeamLimits } from "@/lib/services/teams";
import { runCli } from "../helpers/cli";
import { family, sample, scrape } from "../helpers/metrics";
import { baseUrl, client, db, makeTeam, type TestTeam } from "../helpers/context";
import { as, newUser } from "../helpers/session";
import { complete, makeDeployment, parseSse, type TestDeployment } from "../helpers/deployments";
import {
  completionEvent as ev,
  DEFAULT_TOKENS,
  refusedUrl,
  startFakeUpstream,
  type FakeUpstream,
} from "../helpers/fake-upstream";

const openai = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${baseUrl}/v1`, maxRetries: 0 });

const fakes: FakeUpstream[] = [];
afterAll(async () => {
  await Promise.all(fakes.map((f) => f.close()));
});
async function fake(kind: UpstreamKind, mode?: FakeUpstream["mode"]) {
  const f = await startFakeUpstream(kind, mode);
  fakes.push(f);
  return f;
}

async function upstreamDeployment(
  team: Pick<TestTeam, "id" | "slug">,
  upstream: { kind: UpstreamKind; urls: string[]; model: string; key?: string },
  checkUpstreamHosts = false,
): Promise<TestDeployment> {
  const dep = await createDeployment(db().db, {
    teamId: team.id,
    name: `up-${randomToken(8)}`,
    upstream,
    checkUpstreamHosts,
  });
  const p = `/deployments/${team.slug}/${dep.name}`;
  return { id: dep.id, name: dep.name, path: p, url: baseUrl + p };
}

async function postStream(url: string, key: string, body: Record<string, unknown>) {
  const res = await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ ...body, stream: true }),
  });
  return { res, events: parseSse(await res.text()) };
}

function getStream(url: string): Promise<{ updates: string[]; end: unknown }> {
  return new Promise((resolve, reject) => {
    const es = new EventSource(url);
    const updates: string[] = [];
    es.addEventListener("update", (e) => updates.push(StreamUpdateEvent.parse(JSON.parse(e.data)).completion));
    es.addEventListener("end", (e) => {
      es.close();
      resolve({ updates, end: StreamEndEvent.parse(JSON.parse(e.data)) });
    });
    es.onerror = (err) => {
      es.close();
      reject(new Error(`GET stream failed: ${String((err as { message?: string }).message)}`));
    };
  });
}

const qs = (params: Record<string, string | number>) =>
  new URLSearchParams(Object.entries(params).map(([k, v]) => [k, String(v)])).toString();

describe("the platform's own OpenAI endpoint as an upstream", () => {
  // Team A serves the tiny model locally; team B's deployment is served by A's /v1 with A's key.
  let a: TestTeam, b: TestTeam, local: TestDeployment, remote: TestDeployment;
  const ready = (async () => {
    a = await makeTeam();
    b = await makeTeam();
    local = await makeDeployment(a);
    remote = await upstreamDeployment(b, {
      kind: "openai",
      urls: [baseUrl],
      model: `${a.slug}/${local.name}`,
      key: a.apiKey,
    });
  })();

  it("deployment POST: the same completion as the local deployment, streamed and not", async () => {
    await ready;
    const req = { prompt: "Once upon a time", max_tokens: 12, temperature: 0, n: 1, stop: [" zzz"] };
    const direct = DeploymentCompletionResponse.parse((await complete(local, a.modelKey, req)).json);
    const via = await complete(remote, b.modelKey, req);
    expect(via.status, via.text).toBe(200);
    const viaBody = DeploymentCompletionResponse.parse(via.json);
    expect(viaBody.result[0]!.completion).toBe(direct.result[0]!.completion);
    expect(viaBody.result[0]!.finish_reason).toBe(direct.result[0]!.finish_reason);
    expect(viaBody.usage).toEqual(direct.usage);

    const { res, events } = await postStream(remote.url, b.modelKey, req);
    expect(res.status).toBe(200);
    expect(events.at(-1)!.data).toBe("[DONE]");
    const chunks = events.slice(0, -1).map((e) => DeploymentStreamChunk.parse(JSON.parse(e.data)));
    const text = chunks.map((c) => ("completion" in c && !("finish_reason" in c) ? c.completion : "")).join("");
    expect(text).toBe(direct.result[0]!.completion);
    expect(chunks.at(-1)).toEqual({ usage: direct.usage });
  });

  it("deployment GET stream: updates that add up to the completion, then end", async () => {
    await ready;
    const params = { prompt: "The old man", max_tokens: 10, temperature: 0 };
    const direct = DeploymentCompletionResponse.parse((await complete(local, a.modelKey, params)).json);
    const got = await getStream(`${remote.url}?${qs({ ...params, authorization: `Bearer ${b.modelKey}` })}`);
    expect(got.updates.join("")).toBe(direct.result[0]!.completion);
    expect(got.end).toMatchObject({ finish_reason: direct.result[0]!.finish_reason });
  });

  it("POST /v1/completions and /v1/chat/completions through the openai client, streamed and not", async () => {
    await ready;
    const model = `${b.slug}/${remote.name}`;
    const localModel = `${a.slug}/${local.name}`;
    const req = { prompt: "Hello there", max_tokens: 10, temperature: 0, logprobs: 2 };
    const direct = CompletionsResponse.parse(await openai(a.apiKey).completions.create({ ...req, model: localModel }));
    const via = CompletionsResponse.parse(await openai(b.apiKey).completions.create({ ...req, model }));
    expect(via.model).toBe(model);
    expect(via.choices[0]!.text).toBe(direct.choices[0]!.text);
    expect(via.choices[0]!.logprobs!.tokens.join("")).toBe(via.choices[0]!.text);
    expect(via.choices[0]!.logprobs!.token_logprobs).toEqual(direct.choices[0]!.logprobs!.token_logprobs);
    expect(via.usage).toEqual(direct.usage);

    let streamed = "";
    let usage: unknown;
    const stream = await openai(b.apiKey).completions.create({
      ...req,
      model,
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const chunk of stream) {
      streamed += chunk.choices[0]?.text ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    expect(streamed).toBe(direct.choices[0]!.text);
    expect(usage).toEqual(direct.usage);

    const messages = [{ role: "user" as const, content: "Tell me a story" }];
    const chatDirect = ChatCompletionResponse.parse(
      (
        await client(a.apiKey).post("/v1/chat/completions", {
          model: localModel,
          messages,
          max_tokens: 8,
          temperature: 0,
        })
      ).json,
    );
    const chat = await client(b.apiKey).post("/v1/chat/completions", {
      model,
      messages,
      max_tokens: 8,
      temperature: 0,
    });
    expect(chat.status, chat.text).toBe(200);
    const chatBody = ChatCompletionResponse.parse(chat.json);
    expect(chatBody.choices[0]!.message.content).toBe(chatDirect.choices[0]!.message.content);
    expect(chatBody.usage.prompt_tokens).toBe(chatDirect.usage.prompt_tokens);

    let chatStreamed = "";
    const chatStream = await openai(b.apiKey).chat.completions.create({
      model,
      messages,
      max_tokens: 8,
      temperature: 0,
      stream: true,
    });
    for await (const chunk of chatStream) chatStreamed += chunk.choices[0]?.delta?.content ?? "";
    expect(chatStreamed).toBe(chatDirect.choices[0]!.message.content);
  });

  it("counts the upstream deployment's usage for its own team", async () => {
    await ready;
    const before = await client(b.apiKey).get("/v1/usage");
    expect(before.status).toBe(200);
    await complete(remote, b.modelKey, { prompt: "Count me", max_tokens: 4, temperature: 0 });
    await new Promise((r) => setTimeout(r, 400)); // USAGE_FLUSH_MS is 100 in the suite
    const after = await client(b.apiKey).get("/v1/usage");
    expect(JSON.stringify(after.json)).not.toBe(JSON.stringify(before.json));
  });
  it("captures an upstream completion into its own team's pipeline, like a local one", async () => {
    await ready;
    const created = await client(b.apiKey).post("/v1/pipelines/create", { name: "upstream captures" });
    expect(created.status, created.text).toBe(200);
    const messages = [{ role: "user" as const, content: "Tell me" }];
    const reply = await openai(b.apiKey).chat.completions.create(
      { model: `${b.slug}/${remote.name}`, messages, max_tokens: 8, temperature: 0, stream: true },
      { headers: { "X-Pipeline-Id": created.json.id, "X-Pipeline-User-Id": "u-up" } },
    );
    let text = "";
    for await (const chunk of reply) text += chunk.choices[0]?.delta?.content ?? "";
    let listed: { url: string; userId: string | null }[] = [];
    await expect
      .poll(
        async () => {
          listed = (await client(b.apiKey).post(`/v1/pipelines/${created.json.id}/samples`, {})).json;
          return listed.length;
        },
        { timeout: 15_000, interval: 50 },
      )
      .toBe(1);
    expect(listed[0]!.userId).toBe("u-up");
    expect(await (await fetch(listed[0]!.url)).json()).toEqual([...messages, { role: "assistant", content: text }]);
  });
});

describe("parameter mapping per kind", () => {
  it("vLLM: every sampling parameter under its own name, logprobs and the stop string mapped back", async () => {
    const team = await makeTeam();
    const up = await fake("vllm", { type: "ok", stopReason: " end" });
    const dep = await upstreamDeployment(team, { kind: "vllm", urls: [up.url], model: "meta/llama" });
    const res = await complete(dep, team.modelKey, {
      prompt: "Hi",
      max_tokens: 20,
      temperature: 0.7,
      top_p: 0.9,
      top_k: 40,
      repetition_penalty: 1.2,
      stop: [" end"],
      n: 2,
      seed: 3,
      logit_bias: { "50256": -100 },
      bad_words: ["darn"],
      logprobs: 2,
      echo: true,
    });
    expect(res.status, res.text).toBe(200);
    expect(up.received).toHaveLength(1);
    expect(up.received[0]!.path).toBe("/v1/completions");
    expect(up.received[0]!.body).toEqual({
      model: "meta/llama",
      prompt: "Hi",
      max_tokens: 20,
      temperature: 0.7,
      top_p: 0.9,
      top_k: 40,
      repetition_penalty: 1.2,
      stop: [" end"],
      n: 2,
      seed: 3,
      logit_bias: { "50256": -100 },
      bad_words: ["darn"],
      logprobs: 2,
      echo: true,
      stream: true,
      stream_options: { include_usage: true },
    });
    const body = DeploymentCompletionResponse.parse(res.json);
    expect(body.result).toHaveLength(2);
    for (const r of body.result) {
      expect(r.completion).toBe(DEFAULT_TOKENS.join(""));
      expect(r.finish_reason).toBe("stop");
      expect(r.stop).toBe(" end");
      expect(r.logprobs!.map((l) => l.token)).toEqual(DEFAULT_TOKENS);
      expect(r.logprobs![0]!.top_logprobs).toHaveLength(2);
    }
    expect(body.usage).toEqual({ prompt_tokens: 7, completion_tokens: 8, total_tokens: 15 });
  });

  it("llama.cpp: repeat_penalty; TGI chat: logprobs as OpenAI's chat fields; Ollama: seed", async () => {
    const team = await makeTeam();
    const llama = await fake("llamacpp");
    const dep = await upstreamDeployment(team, { kind: "llamacpp", urls: [llama.url], model: "gguf" });
    const r1 = await complete(dep, team.modelKey, { prompt: "Hi", repetition_penalty: 1.3, top_k: 5, seed: 1 });
    expect(r1.status, r1.text).toBe(200);
    expect(llama.received[0]!.body).toMatchObject({ repeat_penalty: 1.3, top_k: 5, seed: 1, max_tokens: 16 });
    expect(llama.received[0]!.body).not.toHaveProperty("repetition_penalty");

    const tgi = await fake("tgi");
    const tgiDep = await upstreamDeployment(team, { kind: "tgi", urls: [tgi.url], model: "tgi" });
    const chat = await client(team.apiKey).post("/v1/chat/completions", {
      model: tgiDep.name,
      messages: [{ role: "user", content: "hey" }],
      max_tokens: 5,
      logprobs: true,
      top_logprobs: 2,
    });
    expect(chat.status, chat.text).toBe(200);
    expect(tgi.received[0]!.path).toBe("/v1/chat/completions");
    expect(tgi.received[0]!.body).toMatchObject({
      model: "tgi",
      messages: [{ role: "user", content: "hey" }],
      max_tokens: 5,
      logprobs: true,
      top_logprobs: 2,
      stream: true,
    });
    const chatBody = ChatCompletionResponse.parse(chat.json);
    expect(chatBody.choices[0]!.message.content).toBe(DEFAULT_TOKENS.join(""));
    expect(chatBody.choices[0]!.logprobs!.content.map((t) => t.token)).toEqual(DEFAULT_TOKENS);

    const ollama = await fake("ollama");
    const oDep = await upstreamDeployment(team, { kind: "ollama", urls: [ollama.url], model: "llama3" });
    const r3 = await complete(oDep, team.modelKey, { prompt: "Hi", seed: 9, stop: ["."] });
    expect(r3.status, r3.text).toBe(200);
    expect(ollama.received[0]!.body).toMatchObject({ model: "llama3", seed: 9, stop: ["."] });
  });

  it("refuses what the kind cannot honour with a 400 naming the parameter and the backend", async () => {
    const team = await makeTeam();
    const cases: [UpstreamKind, Record<string, unknown>, string, RegExp][] = [
      ["vllm", { tfs: 0.9 }, "tfs", /vLLM/],
      ["ollama", { top_k: 5 }, "top_k", /Ollama/],
      ["tgi", { n: 2 }, "n", /TGI/],
      ["llamacpp", { echo: true }, "echo", /llama\.cpp/],
      ["openai", { repetition_penalty: 1.5 }, "repetition_penalty", /OpenAI/],
      ["vllm", { logit_bias: { hello: 5 } }, "logit_bias", /token ids/],
    ];
    for (const [kind, params, param, backend] of cases) {
      const up = await fake(kind);
      const dep = await upstreamDeployment(team, { kind, urls: [up.url], model: "m" });
      const res = await complete(dep, team.modelKey, { prompt: "Hi", ...params });
      expect(res.status, `${kind} ${param}`).toBe(400);
      expect(res.json.error).toMatchObject({ type: "invalid_request", param });
      expect(res.json.error.message).toMatch(backend);
      expect(up.received).toHaveLength(0); // refused before anything was sent
    }
    // The neutral values ask for nothing and pass.
    const up = await fake("ollama");
    const dep = await upstreamDeployment(team, { kind: "ollama", urls: [up.url], model: "m" });
    const ok = await complete(dep, team.modelKey, { prompt: "Hi", tfs: 1, n: 1, repetition_penalty: 1, echo: false });
    expect(ok.status, ok.text).toBe(200);
  });

  it("takes a JSON answer from a server that does not stream", async () => {
    const team = await makeTeam();
    const up = await fake("openai", { type: "json", text: "whole answer" });
    const dep = await upstreamDeployment(team, { kind: "openai", urls: [up.url], model: "m" });
    const res = await complete(dep, team.modelKey, { prompt: "Hi" });
    expect(res.status, res.text).toBe(200);
    expect(DeploymentCompletionResponse.parse(res.json).result[0]!.completion).toBe("whole answer");
  });
});

describe("relaying the stream", () => {
  const usage = `data: ${JSON.stringify({ id: "c", choices: [], usage: { prompt_tokens: 2, completion_tokens: 5, total_tokens: 7 } })}\n\n`;
  // Split inside the two bytes of its "ø": a character cut between two reads must come out whole.
  const split = Buffer.from(ev(" yøu"));
  const at = split.indexOf(Buffer.from("ø")) + 1;

  /** The upstream's writes: three events in one, then one split over two writes, then the end. */
  const writes = (waitForClient: () => Promise<void>) => [
    ev("Hel") + ev("lo") + ev(" there"),
    waitForClient,
    split.subarray(0, at),
    30,
    Buffer.concat([split.subarray(at), Buffer.from(ev("!", "length") + usage + "data: [DONE]\n\n")]),
  ];

  it("POST: events of one upstream read go out as one chunk, in order; a split event comes out whole", async () => {
    const team = await makeTeam();
    let firstSeen!: () => void;
    const seen = new Promise<void>((r) => (firstSeen = r));
    // The upstream waits until the client has the first chunk: nothing arrived alone is held back.
    const up = await fake("vllm", { type: "raw", writes: writes(() => seen) });
    const dep = await upstreamDeployment(team, { kind: "vllm", urls: [up.url], model: "m" });
    const res = await fetch(dep.url, {
      method: "POST",
      headers: { authorization: `Bearer ${team.modelKey}`, "content-type": "application/json" },
      body: JSON.stringify({ prompt: "Hi", max_tokens: 5, stream: true }),
    });
    expect(res.status).toBe(200);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    while (!text.includes("\n\n")) text += (await reader.read()).value ?? "";
    firstSeen();
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += r.value;
    const events = parseSse(text);
    expect(events.at(-1)!.data).toBe("[DONE]");
    expect(events.slice(0, -1).map((e) => DeploymentStreamChunk.parse(JSON.parse(e.data)))).toEqual([
      { index: 0, completion: "Hello there" },
      { index: 0, completion: " yøu!" },
      { index: 0, completion: "", finish_reason: "length", stop: null },
      { usage: { prompt_tokens: 2, completion_tokens: 5, total_tokens: 7 } },
    ]);
  });

  it("a generation that breaks off after streaming is charged what it streamed (before: nothing)", async () => {
    const team = await makeTeam();
    const up = await fake("vllm", { type: "cut" }); // 200 and one token, then the connection closes
    const dep = await upstreamDeployment(team, { kind: "vllm", urls: [up.url], model: "m" });
    const { res, events } = await postStream(dep.url, team.modelKey, { prompt: "Hi" });
    expect(res.status).toBe(200);
    const last = JSON.parse(events.filter((e) => e.data !== "[DONE]").at(-1)!.data) as { error?: { message: string } };
    expect(last.error?.message).toMatch(/closed the stream|broke off|before it finished/);
    const today = new Date().toISOString().slice(0, 10);
    await expect
      .poll(async () => UsageResponse.parse((await client(team.apiKey).get("/v1/usage?groupBy=day")).json).data, {
        timeout: 10_000,
      })
      .toEqual([{ day: today, requests: 1, prompt_tokens: 0, completion_tokens: 1 }]);
  });

  it("an upstream that sends fewer choices than n asked is a 502, not empty answers (nothing captured)", async () => {
    const team = await makeTeam();
    const up = await fake("openai", { type: "raw", writes: [ev("Hi", "stop") + usage + "data: [DONE]\n\n"] });
    const dep = await upstreamDeployment(team, { kind: "openai", urls: [up.url], model: "m" });
    const res = await complete(dep, team.modelKey, { prompt: "Hi", n: 3 });
    expect(res.status, res.text).toBe(502);
    expect(res.json.error.message).toMatch(/sent 1 of the 3 choices/); // before: 200, two empty "stop" choices
    expect((await complete(dep, team.modelKey, { prompt: "Hi" })).status).toBe(200); // n = 1 is whole
  });

  it("ends the client's response at the upstream's [DONE], and keeps the upstream connection for the next request", async () => {
    const team = await makeTeam();
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    // [DONE] sent, but the upstream's body does not end until the test says so.
    const up = await fake("vllm", { type: "raw", writes: [ev("Hi", "stop") + usage + "data: [DONE]\n\n", () => held] });
    const dep = await upstreamDeployment(team, { kind: "vllm", urls: [up.url], model: "m" });
    const first = postStream(dep.url, team.modelKey, { prompt: "Hi" });
    const got = await Promise.race([first, new Promise<null>((r) => setTimeout(() => r(null), 5000))]);
    release();
    expect(got, "the client's response waited for the upstream's body to end").not.toBeNull();
    expect(got!.events.map((e) => e.data).at(-1)).toBe("[DONE]");
    expect(JSON.parse(got!.events.at(-2)!.data)).toEqual({
      usage: { prompt_tokens: 2, completion_tokens: 5, total_tokens: 7 },
    });

    // The rest of the body was read in the background: the connection went back to the pool.
    up.mode = { type: "raw", writes: [ev("Again", "stop") + "data: [DONE]\n\n"] };
    await new Promise((r) => setTimeout(r, 200));
    const again = await postStream(dep.url, team.modelKey, { prompt: "Hi" });
    expect(again.events.at(-1)!.data).toBe("[DONE]");
    expect(up.received).toHaveLength(2);
    expect(up.connections).toBe(1);
  });

  it("a client that leaves is charged the tokens it was streamed (the server reports no usage for a stream cut short)", async () => {
    const never = new Promise<void>(() => {});
    /** Three tokens in three reads, then nothing; `sent` resolves once the three are out. */
    const threeThenNothing = () => {
      let sent!: () => void;
      const out = new Promise<void>((r) => (sent = r));
      const writes = [ev("One"), 20, ev(" two"), 20, ev(" three"), async () => sent(), () => never];
      return { mode: { type: "raw" as const, writes }, sent: out };
    };
    const leave = async (url: string, key: string, body: object, until: () => Promise<unknown>) => {
      const left = new AbortController();
      const res = fetch(url, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify(body),
        signal: left.signal,
      }).catch((e: unknown) => e);
      await until();
      left.abort();
      await res;
    };
    const charged = async (team: TestTeam) => {
      const rows = async () =>
        (await client(team.apiKey).get("/v1/usage?groupBy=deployment")).json.data as { requests: number }[];
      await expect.poll(async () => (await rows()).length, { timeout: 10_000 }).toBe(1);
      return (await rows())[0];
    };

    for (const stream of [true, false]) {
      const team = await makeTeam();
      const { mode, sent } = threeThenNothing();
      const up = await fake("vllm", mode);
      const dep = await upstreamDeployment(team, { kind: "vllm", urls: [up.url], model: "m" });
      // Leaves once the three reached the app (and, streamed, were relayed: a read of the last).
      await leave(dep.url, team.modelKey, { prompt: "Hi", max_tokens: 50, stream }, async () => {
        await sent;
        await new Promise((r) => setTimeout(r, 100));
      });
      expect({ stream, ...(await charged(team)) }).toMatchObject({
        stream,
        requests: 1,
        prompt_tokens: 0,
        completion_tokens: 3,
      });
      await expect.poll(() => up.abandoned, { timeout: 5_000 }).toBe(1); // and the upstream request closed
    }
  });

  it("GET: the same as updates, then the end with the usage", async () => {
    const team = await makeTeam();
    const up = await fake("vllm", { type: "raw", writes: writes(() => new Promise((r) => setTimeout(r, 30))) });
    const dep = await upstreamDeployment(team, { kind: "vllm", urls: [up.url], model: "m" });
    const got = await getStream(
      `${dep.url}?${qs({ prompt: "Hi", max_tokens: 5, authorization: `Bearer ${team.modelKey}` })}`,
    );
    expect(got.updates).toEqual(["Hello there", " yøu!"]);
    expect(got.end).toEqual({
      finish_reason: "length",
      stop: null,
      usage: { prompt_tokens: 2, completion_tokens: 5, total_tokens: 7 },
    });
  });
});

describe("limits", () => {
  it("an upstream deployment counts against the key's concurrent generations and tokens per minute", async () => {
    const team = await makeTeam();
    const up = await fake("vllm");
    const dep = await upstreamDeployment(team, { kind: "vllm", urls: [up.url], model: "m" });
    await setTeamLimits(db().db, { teamId: team.id, limits: { concurrentStreams: 1, tokensPerMinute: 15 } });
    const slow = postStream(dep.url, team.modelKey, { prompt: "slow" });
    while (up.received.length === 0) await new Promise((r) => setTimeout(r, 10));
    const busy = await complete(dep, team.modelKey, { prompt: "Hi" });
    expect(busy.status).toBe(429);
    expect(busy.json.error.message).toMatch(/generations running/);
    expect((await slow).res.status).toBe(200);
    // The upstream's usage (7 prompt + 4 completion tokens a request) is what is counted.
    let spent: Awaited<ReturnType<typeof complete>> | undefined;
    for (let i = 0; i < 4 && spent?.status !== 429; i++) spent = await complete(dep, team.modelKey, { prompt: "Hi" });
    expect(spent!.status).toBe(429);
    expect(spent!.json.error.message).toMatch(/used its 15 tokens/);
    expect(up.received.length).toBeLessThanOrEqual(4);
  });
});

describe("resilience", () => {
  it("fails over from a refused port and from a 500 to a good URL, and avoids the bad ones for a while", async () => {
    const team = await makeTeam();
    const good = await fake("vllm");
    const broken = await fake("vllm", { type: "status", status: 500, message: "CUDA out of memory" });
    const refused = await refusedUrl();
    const dep = await upstreamDeployment(team, { kind: "vllm", urls: [refused, broken.url, good.url], model: "m" });
    for (let i = 0; i < 4; i++) {
      const res = await complete(dep, team.modelKey, { prompt: "Hi", max_tokens: 4 });
      expect(res.status, res.text).toBe(200);
    }
    expect(good.received).toHaveLength(4);
    expect(broken.received.length).toBe(1); // then avoided
    // After UPSTREAM_AVOID_MS (1.5 s in the suite) it is probed again, and serves once healthy.
    broken.mode = { type: "ok" };
    await new Promise((r) => setTimeout(r, 1700));
    for (let i = 0; i < 6; i++) await complete(dep, team.modelKey, { prompt: "Hi", max_tokens: 4 });
    expect(broken.received.length).toBeGreaterThan(1);
  });

  it("a URL that failed for one team is still in another team's rotation", async () => {
    // Team a's requests are what fails on the shared server (a 500 for its model, say): a URL
    // passed over for every team would let a take it away from b.
    const [a, b] = [await makeTeam(), await makeTeam()];
    const shared = await fake("vllm", { type: "status", status: 500, message: "CUDA out of memory" });
    const spare = await fake("vllm");
    const urls = [shared.url, spare.url];
    const depA = await upstreamDeployment(a, { kind: "vllm", urls, model: "m" });
    const depB = await upstreamDeployment(b, { kind: "vllm", urls, model: "m" });
    for (let i = 0; i < 2; i++) expect((await complete(depA, a.modelKey, { prompt: "Hi" })).status).toBe(200);
    expect(shared.received).toHaveLength(1); // then a passes it over
    shared.mode = { type: "ok" };
    for (let i = 0; i < 4; i++) expect((await complete(depB, b.modelKey, { prompt: "Hi" })).status).toBe(200);
    expect(shared.received.length).toBeGreaterThan(1); // b still uses it
    const seen = shared.received.length;
    for (let i = 0; i < 2; i++) await complete(depA, a.modelKey, { prompt: "Hi" });
    expect(shared.received).toHaveLength(seen); // a still passes it over (1.5 s in the suite)
  });

  it("balances over healthy URLs", async () => {
    const team = await makeTeam();
    const one = await fake("openai");
    const two = await fake("openai");
    const dep = await upstreamDeployment(team, { kind: "openai", urls: [one.url, two.url], model: "m" });
    await Promise.all(Array.from({ length: 8 }, () => complete(dep, team.modelKey, { prompt: "Hi" })));
    expect(one.received.length + two.received.length).toBe(8);
    expect(one.received.length).toBeGreaterThan(0);
    expect(two.received.length).toBeGreaterThan(0);
  });

  it("sends a request to the URL with the fewest in flight, not merely the next in turn", async () => {
    const team = await makeTeam();
    const one = await fake("openai");
    const two = await fake("openai");
    const dep = await upstreamDeployment(team, { kind: "openai", urls: [one.url, two.url], model: "m" });
    const long = postStream(dep.url, team.modelKey, { prompt: "slow" }); // ~750 ms in flight
    while (one.received.length + two.received.length === 0) await new Promise((r) => setTimeout(r, 10));
    for (let i = 0; i < 6; i++) expect((await complete(dep, team.modelKey, { prompt: "Hi" })).status).toBe(200);
    expect((await long).res.status).toBe(200);
    const [busy, idle] = one.received[0]?.body.prompt === "slow" ? [one, two] : [two, one];
    expect(busy.received.map((r) => r.body.prompt)).toEqual(["slow"]);
    expect(idle.received).toHaveLength(6);
  });

  it("relays an upstream 4xx with its status and message, without trying another URL", async () => {
    const team = await makeTeam();
    const bad = await fake("tgi", { type: "status", status: 422, message: "Input validation error: inputs too long" });
    const other = await fake("tgi");
    const dep = await upstreamDeployment(team, { kind: "tgi", urls: [bad.url, other.url], model: "m" });
    // Until the request lands on `bad`: the order rotates.
    let res = await complete(dep, team.modelKey, { prompt: "Hi" });
    for (let i = 0; i < 4 && bad.received.length === 0; i++) res = await complete(dep, team.modelKey, { prompt: "Hi" });
    expect(bad.received.length).toBe(1);
    expect(res.status).toBe(422);
    expect(res.json.error.type).toBe("invalid_request");
    expect(res.json.error.message).toMatch(/inputs too long/);
  });

  it("answers 502 when the upstream refuses the deployment's key (never the caller's 401) or redirects", async () => {
    const team = await makeTeam();
    for (const status of [401, 403]) {
      const refusing = await fake("openai", {
        type: "status",
        status,
        message: "Incorrect API key provided: sk-proj-****WXYZ",
      });
      const dep = await upstreamDeployment(team, { kind: "openai", urls: [refusing.url], model: "m" });
      const res = await complete(dep, team.modelKey, { prompt: "Hi" });
      // Before: the upstream's 401 as is, and OpenAI's message with the end of the operator's key.
      expect(res.status, res.text).toBe(502);
      expect(res.json.error.message).toMatch(new RegExp(`refused this deployment's credentials \\(${status}\\)`));
      expect(res.text).not.toContain("sk-proj");
    }
    const moved = await fake("openai", { type: "status", status: 301, message: "Moved Permanently" });
    const dep = await upstreamDeployment(team, { kind: "openai", urls: [moved.url], model: "m" });
    const res = await complete(dep, team.modelKey, { prompt: "Hi" });
    expect(res.status, res.text).toBe(502);
    expect(res.json.error.message).toMatch(/answered 301 \(a redirect\)/);
  });

  it("a busy server (429) sends the request to the next URL; all of them busy: 429 with Retry-After", async () => {
    const team = await makeTeam();
    const busy = await fake("tgi", { type: "status", status: 429, message: "Model is overloaded" });
    const other = await fake("tgi");
    const dep = await upstreamDeployment(team, { kind: "tgi", urls: [busy.url, other.url], model: "m" });
    for (let i = 0; i < 4; i++) {
      const res = await complete(dep, team.modelKey, { prompt: "Hi" });
      expect(res.status, res.text).toBe(200);
    }
    expect(busy.received.length).toBeGreaterThan(0); // tried, then passed over
    const alone = await upstreamDeployment(team, { kind: "tgi", urls: [busy.url], model: "m" });
    const res = await complete(alone, team.modelKey, { prompt: "Hi" });
    expect(res.status).toBe(429);
    expect(res.json.error).toMatchObject({ type: "rate_limited", message: expect.stringMatching(/busy.*overloaded/) });
    expect(res.headers.get("retry-after")).toMatch(/^\d+$/);
  });

  it("a server without the model (404: an Ollama that has not pulled it) sends the request to the next URL", async () => {
    const team = await makeTeam();
    const missing = await fake("ollama", {
      type: "status",
      status: 404,
      message: 'model "m" not found, try pulling it first',
    });
    const other = await fake("ollama");
    const dep = await upstreamDeployment(team, { kind: "ollama", urls: [missing.url, other.url], model: "m" });
    for (let i = 0; i < 4; i++) {
      const res = await complete(dep, team.modelKey, { prompt: "Hi" });
      expect(res.status, res.text).toBe(200); // before: the 404 whenever the request landed on `missing`
    }
    expect(missing.received.length).toBeGreaterThan(0); // tried each time it came first, and the next URL answered
    const alone = await upstreamDeployment(team, { kind: "ollama", urls: [missing.url], model: "m" });
    const res = await complete(alone, team.modelKey, { prompt: "Hi" });
    expect(res.status).toBe(404);
    expect(res.json.error).toMatchObject({ type: "not_found", message: expect.stringMatching(/try pulling it first/) });
  });

  it("all URLs down: 503 in the error shape within a second; a 5xx everywhere: 502", async () => {
    const team = await makeTeam();
    const dep = await upstreamDeployment(team, {
      kind: "vllm",
      urls: [await refusedUrl(), await refusedUrl()],
      model: "m",
    });
    const started = Date.now();
    const res = await complete(dep, team.modelKey, { prompt: "Hi" });
    expect(Date.now() - started).toBeLessThan(1000);
    expect(res.status).toBe(503);
    expect(res.json.error.type).toBe("internal");
    expect(res.headers.get("retry-after")).toBeTruthy();
    const chat = await client(team.apiKey).post("/v1/chat/completions", {
      model: dep.name,
      messages: [{ role: "user", content: "hi" }],
    });
    expect(chat.status).toBe(503);

    const broken = await fake("vllm", { type: "status", status: 503, message: "overloaded" });
    const dep2 = await upstreamDeployment(team, { kind: "vllm", urls: [broken.url], model: "m" });
    const res2 = await complete(dep2, team.modelKey, { prompt: "Hi" });
    expect(res2.status).toBe(502);
    expect(res2.json.error.message).toMatch(/overloaded/);
  });

  it("times out an upstream that never answers (next URL) and one that goes silent mid-stream", async () => {
    const team = await makeTeam();
    const silent = await fake("openai", { type: "silent" });
    const dep = await upstreamDeployment(team, { kind: "openai", urls: [silent.url], model: "m" });
    let started = Date.now();
    const res = await complete(dep, team.modelKey, { prompt: "Hi" });
    expect(res.status).toBe(503);
    expect(Date.now() - started).toBeLessThan(4000); // UPSTREAM_FIRST_BYTE_TIMEOUT_MS is 2 s in the suite

    const silent2 = await fake("openai", { type: "silent" });
    const good = await fake("openai");
    const dep2 = await upstreamDeployment(team, { kind: "openai", urls: [silent2.url, good.url], model: "m" });
    for (let i = 0; i < 2; i++) expect((await complete(dep2, team.modelKey, { prompt: "Hi" })).status).toBe(200);

    const stall = await fake("openai", { type: "stall-mid" });
    const dep3 = await upstreamDeployment(team, { kind: "openai", urls: [stall.url], model: "m" });
    started = Date.now();
    const { res: sres, events } = await postStream(dep3.url, team.modelKey, { prompt: "Hi" });
    expect(sres.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(5000);
    const last = JSON.parse(events.filter((e) => e.data !== "[DONE]").at(-1)!.data) as { error?: { message: string } };
    expect(last.error?.message).toMatch(/sent nothing/);

    const cut = await fake("openai", { type: "cut" });
    const dep4 = await upstreamDeployment(team, { kind: "openai", urls: [cut.url], model: "m" });
    const res4 = await complete(dep4, team.modelKey, { prompt: "Hi" });
    expect(res4.status).toBe(502);
    // The same through the OpenAI surface, answered whole (before: 500 "Generation failed").
    const whole = await client(team.apiKey).post("/v1/completions", { model: dep4.name, prompt: "Hi", max_tokens: 4 });
    expect(whole.status, whole.text).toBe(502);
  });
});

describe("upstream metrics", () => {
  /** The value of `name` for `upstream` (and `labels`) on /metrics, 0 when it has none. */
  const metric = async (name: string, upstream: string, labels: Record<string, string> = {}) =>
    Number(sample(family((await scrape()).families, name), { upstream, ...labels })?.value ?? 0);

  it("count each URL's requests by how they began and its answers that broke off; show what is in flight and avoided", async () => {
    const team = await makeTeam();
    const good = await fake("vllm");
    const failing = await fake("vllm", { type: "status", status: 500, message: "CUDA out of memory" });
    const invalid = await fake("vllm", { type: "status", status: 422, message: "prompt too long" });
    const silent = await fake("vllm", { type: "silent" });
    const cut = await fake("vllm", { type: "cut" });
    // A body that ends without a finish or [DONE].
    const unfinished = await fake("vllm", { type: "raw", writes: ['data: {"choices":[{"index":0,"text":"Hi"}]}\n\n'] });
    const refused = await refusedUrl();
    const alone = async (url: string) => upstreamDeployment(team, { kind: "vllm", urls: [url], model: "m" });
    const requests = (url: string, outcome: string) => metric("lmp_upstream_requests_total", url, { outcome });

    const onGood = await alone(good.url);
    for (let i = 0; i < 2; i++) expect((await complete(onGood, team.modelKey, { prompt: "Hi" })).status).toBe(200);
    expect((await complete(await alone(silent.url), team.modelKey, { prompt: "Hi" })).status).toBe(503);
    expect((await complete(await alone(cut.url), team.modelKey, { prompt: "Hi" })).status).toBe(502);
    expect((await complete(await alone(unfinished.url), team.modelKey, { prompt: "Hi" })).status).toBe(502);
    // These last, so that they are still avoided when the avoided URLs are read below.
    expect((await complete(await alone(failing.url), team.modelKey, { prompt: "Hi" })).status).toBe(502);
    expect((await complete(await alone(invalid.url), team.modelKey, { prompt: "Hi" })).status).toBe(422);
    expect((await complete(await alone(refused), team.modelKey, { prompt: "Hi" })).status).toBe(503);

    // A URL that failed before answering is passed over for a while (1.5 s in the suite); a 4xx
    // is the request's own, and a healthy URL is never avoided.
    const avoided = Object.fromEntries(
      await Promise.all(
        [good.url, failing.url, invalid.url, refused].map(async (u) => [u, await metric("lmp_upstream_avoided", u)]),
      ),
    );
    expect(avoided).toEqual({ [good.url]: 0, [failing.url]: 1, [invalid.url]: 0, [refused]: 1 });

    expect(await requests(good.url, "ok")).toBe(2);
    expect(await requests(failing.url, "server_error")).toBe(1);
    expect(await requests(invalid.url, "client_error")).toBe(1);
    expect(await requests(refused, "unreachable")).toBe(1);
    expect(await requests(silent.url, "timeout")).toBe(1);
    // The cut and the unfinished answers began well, then broke off.
    for (const url of [cut.url, unfinished.url]) {
      expect(await requests(url, "ok"), url).toBe(1);
      expect(await metric("lmp_upstream_broken_streams_total", url), url).toBe(1);
    }
    expect(await metric("lmp_upstream_broken_streams_total", good.url)).toBe(0);
    for (const url of [good.url, failing.url, invalid.url, refused, silent.url])
      expect(await requests(url, "ok"), url).toBe(url === good.url ? 2 : 0);

    // A request in flight (the fake answers "slow" one token every 150 ms).
    const long = postStream(onGood.url, team.modelKey, { prompt: "slow" });
    while (good.received.length < 3) await new Promise((r) => setTimeout(r, 10));
    expect(await metric("lmp_upstream_in_flight", good.url)).toBe(1);
    expect((await long).res.status).toBe(200);
    // Then the URL is forgotten: a deleted deployment's URLs do not pile up in the gauges.
    const series = async (name: string, upstream: string) =>
      sample(family((await scrape()).families, name), { upstream }) !== undefined;
    await expect.poll(() => series("lmp_upstream_in_flight", good.url)).toBe(false);
    expect(await requests(good.url, "ok")).toBe(3);
  });
});

describe("a client that leaves while the upstream has not answered yet", () => {
  // The deployment endpoint, and OpenAI's two paths on the same deployment (with an API key).
  const paths = [
    { name: "the deployment endpoint", openai: undefined },
    { name: "/v1/completions", openai: { path: "/v1/completions", body: { prompt: "Hi" } } },
    {
      name: "/v1/chat/completions",
      openai: { path: "/v1/chat/completions", body: { messages: [{ role: "user", content: "Hi" }] } },
    },
  ];
  for (const { name, openai: viaOpenAi } of paths)
    for (const stream of [true, false])
      it(`${name}: closes the upstream request at once and frees the team's stream slot (${stream ? "streamed" : "one answer"})`, async () => {
        const team = await makeTeam();
        await setTeamLimits(db().db, { teamId: team.id, limits: { concurrentStreams: 1 } });
        const silent = await fake("openai", { type: "silent" });
        const dep = await upstreamDeployment(team, { kind: "openai", urls: [silent.url], model: "m" });
        const controller = new AbortController();
        const leaving = fetch(viaOpenAi ? baseUrl + viaOpenAi.path : dep.url, {
          method: "POST",
          headers: {
            authorization: `Bearer ${viaOpenAi ? team.apiKey : team.modelKey}`,
            "content-type": "application/json",
          },
          body: JSON.stringify(
            viaOpenAi ? { ...viaOpenAi.body, model: `${team.slug}/${dep.name}`, stream } : { prompt: "Hi", stream },
          ),
          signal: controller.signal,
        }).catch((e: unknown) => e);
        await expect.poll(() => silent.received.length, { timeout: 5_000, interval: 20 }).toBe(1);
        const left = Date.now();
        controller.abort();
        expect(await leaving).toMatchObject({ name: "AbortError" });
        // Well before UPSTREAM_FIRST_BYTE_TIMEOUT_MS (2 s in the suite) would have closed it.
        await expect.poll(() => silent.abandoned, { timeout: 1_000, interval: 20 }).toBe(1);
        expect(Date.now() - left).toBeLessThan(1_000);

        const good = await fake("openai");
        const next = await upstreamDeployment(team, { kind: "openai", urls: [good.url], model: "m" });
        const res = await complete(next, team.modelKey, { prompt: "Hi" }); // the one slot is free again
        expect(res.status).toBe(200);
      });
});

describe("the upstream key", () => {
  /** The CLI's run, with what it printed on both streams as `out`. */
  async function cli(env: Record<string, string>, ...args: string[]) {
    const r = await runCli(env, ...args);
    return { ...r, out: r.stdout + r.stderr };
  }

  it("is read from the named variable, sent as Bearer, stored sealed, and never shown again", async () => {
    const team = await makeTeam();
    const up = await fake("vllm");
    const secret = `sk-upstream-${randomToken(20)}`;
    const created = await cli(
      { MY_UPSTREAM_KEY: secret },
      "deployment:create",
      "--team",
      team.slug,
      "--name",
      "gpu",
      "--upstream",
      `${up.url}/v1,${await refusedUrl()}`,
      "--upstream-model",
      "meta-llama/Llama-3.1-8B",
      "--upstream-kind",
      "vllm",
      "--upstream-key-env",
      "MY_UPSTREAM_KEY",
    );
    expect(created.code, created.out).toBe(0);
    expect(created.out).not.toContain(secret);
    expect(created.lastLine).toBe(`${baseUrl}/deployments/${team.slug}/gpu`);

    const res = await fetch(created.lastLine, {
      method: "POST",
      headers: { authorization: `Bearer ${team.modelKey}`, "content-type": "application/json" },
      body: JSON.stringify({ prompt: "Hi", max_tokens: 3 }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(up.received.at(-1)!.headers.authorization).toBe(`Bearer ${secret}`);
    expect(up.received.at(-1)!.body.model).toBe("meta-llama/Llama-3.1-8B");

    const [row] = await db()
      .db.select()
      .from(deployments)
      .where(eq(deployments.id, (await listed()).id));
    expect(row!.upstreamKey).toBeTruthy();
    expect(row!.upstreamKey).not.toContain(secret);

    const list = await cli({}, "deployment:list", "--team", team.slug);
    expect(list.code).toBe(0);
    expect(list.out).toContain("vllm");
    expect(list.out).not.toContain(secret);
    for (const p of ["/v1/deployments/list", "/v1/deployments/gpu", "/v1/models"]) {
      const r = await client(team.apiKey).get(p);
      expect(r.status, p).toBe(200);
      expect(r.text).not.toContain(secret);
      expect(r.text).not.toContain(row!.upstreamKey!);
    }
    const one = await client(team.apiKey).get("/v1/deployments/gpu");
    expect(one.json.upstream).toEqual({
      kind: "vllm",
      urls: [up.url, expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/)],
      model: "meta-llama/Llama-3.1-8B",
      hasKey: true,
    });
    expect(one.json.status.state).toBe("ready");

    // The workers leave upstream deployments alone: none tries to load the upstream's model.
    await new Promise((r) => setTimeout(r, 2500)); // WORKER_HEARTBEAT_SECONDS is 1 in the suite
    const registry = await db().db.select().from(workers);
    expect(registry.length).toBeGreaterThan(0);
    for (const w of registry) expect(JSON.stringify([w.models, w.modelStates])).not.toContain("Llama-3.1-8B");

    // Sealed under another secret (AUTH_SECRET changed, or a CLI ran without it): the 500 says so
    // (before: "Unsupported state or unable to authenticate data" in the log, nothing in the answer).
    await db()
      .db.update(deployments)
      .set({ upstreamKey: seal(secret, row!.id, "another-secret-".repeat(3)) })
      .where(eq(deployments.id, row!.id));
    const unreadable = async () => {
      const r = await fetch(created.lastLine, {
        method: "POST",
        headers: { authorization: `Bearer ${team.modelKey}`, "content-type": "application/json" },
        body: JSON.stringify({ prompt: "Hi", max_tokens: 3 }),
      });
      return { status: r.status, message: ((await r.json()) as { error?: { message: string } }).error?.message };
    };
    await expect
      .poll(unreadable, { timeout: 10_000 })
      .toEqual({ status: 500, message: expect.stringMatching(/stored under another AUTH_SECRET/) });

    async function listed() {
      const r = await client(team.apiKey).get("/v1/deployments/gpu");
      return r.json as { id: string };
    }
  });

  it("the CLI refuses a missing key variable and an unknown kind without creating anything", async () => {
    const team = await makeTeam();
    const noVar = await cli(
      {},
      "deployment:create",
      "--team",
      team.slug,
      "--name",
      "x",
      "--upstream",
      "http://127.0.0.1:9",
      "--upstream-model",
      "m",
      "--upstream-key-env",
      "SURELY_UNSET_VARIABLE_123",
    );
    expect(noVar.code).toBe(2);
    expect(noVar.out).toMatch(/SURELY_UNSET_VARIABLE_123/);
    const badKind = await cli(
      {},
      "deployment:create",
      "--team",
      team.slug,
      "--name",
      "x",
      "--upstream",
      "http://127.0.0.1:9",
      "--upstream-model",
      "m",
      "--upstream-kind",
      "sglang",
    );
    expect(badKind.code).toBe(2);
    const list = await client(team.apiKey).get("/v1/deployments/list");
    expect(list.json).toEqual([]);
  });

  it("an owner creates an upstream deployment on the dashboard; its key never comes back", async () => {
    const owner = await newUser();
    const up = await fake("vllm");
    const secret = `sk-dash-${randomToken(20)}`;
    const created = await as(owner.cookie).post("/api/ui/deployments", {
      name: "fleet",
      upstream: { kind: "vllm", urls: [up.url], model: "qwen", key: secret },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.text).not.toContain(secret);
    expect(created.json).toMatchObject({
      name: "fleet",
      model: "qwen",
      upstream: { kind: "vllm", urls: [up.url], model: "qwen", hasKey: true },
      status: { state: "ready" },
    });
    const listed = await as(owner.cookie).get("/api/ui/deployments");
    expect(listed.status).toBe(200);
    expect(listed.text).not.toContain(secret);
    const both = await as(owner.cookie).post("/api/ui/deployments", {
      name: "both",
      model: "x",
      upstream: { urls: [up.url], model: "qwen" },
    });
    expect(both.status).toBe(400);
    // The app calls an upstream and relays its 4xx: not at this machine or the clouds' metadata
    // service unless the operator lists it (this world lists 127.0.0.1, where the fakes listen).
    for (const url of ["http://169.254.169.254", "http://localhost:9", "http://[::1]:9"]) {
      const local = await as(owner.cookie).post("/api/ui/deployments", {
        name: "probe",
        upstream: { urls: [up.url, url], model: "qwen" },
      });
      expect({ url, status: local.status, param: local.json.error?.param }).toEqual({
        url,
        status: 400,
        param: "upstream.urls[1]",
      });
    }

    const { secret: modelKey } = await createApiKey(db().db, { teamId: owner.team.id, kind: "model", name: "t" });
    const res = await fetch(`${baseUrl}/deployments/${owner.team.slug}/fleet`, {
      method: "POST",
      headers: { authorization: `Bearer ${modelKey}`, "content-type": "application/json" },
      body: JSON.stringify({ prompt: "Hi", max_tokens: 2 }),
    });
    expect(res.status).toBe(200);
    expect(up.received[0]!.headers.authorization).toBe(`Bearer ${secret}`);
  });

  it("checks a dashboard deployment's hosts at every connection, not only when it is made", async () => {
    // A name that resolved elsewhere when the owner made the deployment may later resolve to this
    // machine (DNS rebinding). `localhost` stands for it: this world lists only 127.0.0.1.
    const team = await makeTeam();
    const up = await fake("vllm");
    const url = up.url.replace("127.0.0.1", "localhost");
    const upstream = { kind: "vllm" as const, urls: [url], model: "qwen" };
    const body = { prompt: "Hi", max_tokens: 2 };
    const checked = await upstreamDeployment(team, upstream, true);
    const refused = await complete(checked, team.modelKey, body);
    expect(refused.status).toBe(502);
    expect(refused.json.error.message).toMatch(
      /^The vLLM upstream localhost resolves to (127\.0\.0\.1|::1), this machine or a link-local address, which a deployment made from the dashboard may not reach/,
    );
    expect(up.received).toHaveLength(0);
    // The operator's (the CLI's) deployment of the same URL is not checked; nor a listed host.
    const operators = await upstreamDeployment(team, upstream);
    expect((await complete(operators, team.modelKey, body)).status).toBe(200);
    const listed = await upstreamDeployment(team, { ...upstream, urls: [up.url] }, true);
    expect((await complete(listed, team.modelKey, body)).status).toBe(200);
    expect(up.received).toHaveLength(2);
  });
});
