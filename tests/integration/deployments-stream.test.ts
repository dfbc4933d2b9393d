// Streaming on a deployment: POST stream:true (data-only SSE ended by [DONE]) and the GET
// update/end stream, through raw HTTP and the `eventsource` client; CORS; disconnect cancelling.
import { EventSource } from "eventsource";
import { UsageResponse } from "@/lib/contracts/usage";
import { describe, expect, it } from "vitest";
import {
  DeploymentCompletionResponse,
  DeploymentStreamChunk,
  StreamEndEvent,
  StreamUpdateEvent,
} from "@/lib/contracts/deployments";
import { ChatCompletionChunk } from "@/lib/contracts/chat-completions";
import { createApiKey, revokeApiKey } from "@/lib/services/api-keys";
import { baseUrl, client, db } from "../helpers/context";
import { busySequences, complete, makeTeamWithDeployment, noEosBias, parseSse } from "../helpers/deployments";

async function postStream(url: string, key: string, body: Record<string, unknown>) {
  const res = await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ ...body, stream: true }),
  });
  return { res, events: parseSse(await res.text()) };
}

/** GET {deployment}?query with the `eventsource` client: updates until `end` (or an error). */
function eventSource(url: string): Promise<{ updates: string[]; end: unknown; error?: unknown }> {
  return new Promise((resolve) => {
    const es = new EventSource(url);
    const updates: string[] = [];
    es.addEventListener("update", (e) => updates.push(StreamUpdateEvent.parse(JSON.parse(e.data)).completion));
    es.addEventListener("end", (e) => {
      es.close();
      resolve({ updates, end: StreamEndEvent.parse(JSON.parse(e.data)) });
    });
    es.onerror = (error) => {
      es.close();
      resolve({ updates, end: null, error });
    };
  });
}

const qs = (params: Record<string, string | number>) =>
  new URLSearchParams(Object.entries(params).map(([k, v]) => [k, String(v)])).toString();

describe("POST {deployment_url} with stream: true", () => {
  it("sends data-only events whose deltas concatenate to the non-streamed completion, then [DONE]", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    for (const req of [
      { prompt: "Once upon a time", max_tokens: 24, seed: 11, temperature: 0.9 },
      { prompt: "The old man", max_tokens: 16, seed: 5, n: 2, stop: [" the"] },
    ]) {
      const whole = DeploymentCompletionResponse.parse((await complete(dep, team.modelKey, req)).json);
      const { res, events } = await postStream(dep.url, team.modelKey, req);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
      expect(events.every((e) => e.event === "message")).toBe(true); // data-only
      expect(events.at(-1)!.data).toBe("[DONE]");
      const chunks = events.slice(0, -1).map((e) => DeploymentStreamChunk.parse(JSON.parse(e.data)));
      for (const item of whole.result) {
        const deltas = chunks.filter((c) => "index" in c && c.index === item.index && !("finish_reason" in c));
        expect(deltas.length).toBeGreaterThan(1);
        expect(deltas.map((c) => ("completion" in c ? c.completion : "")).join("")).toBe(item.completion);
        expect(chunks).toContainEqual({
          index: item.index,
          completion: "",
          finish_reason: item.finish_reason,
          stop: item.stop,
        });
      }
      expect(chunks.at(-1)).toEqual({ usage: whole.usage });
    }
  });

  it("streams logprobs with the tokens when asked", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const { events } = await postStream(dep.url, team.modelKey, { prompt: "Hi", max_tokens: 6, seed: 2, logprobs: 2 });
    const chunks = events.slice(0, -1).map((e) => DeploymentStreamChunk.parse(JSON.parse(e.data)));
    const lp = chunks.flatMap((c) => ("logprobs" in c && c.logprobs ? c.logprobs : []));
    const usage = chunks.find((c) => "usage" in c) as { usage: { completion_tokens: number } };
    expect(lp).toHaveLength(usage.usage.completion_tokens);
    expect(lp[0]!.top_logprobs).toHaveLength(2);
  });

  it("errors that prevent the start are plain JSON errors, before any event", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const long = await postStream(dep.url, team.modelKey, { prompt: "Hi there", max_tokens: 1024 });
    expect(long.res.status).toBe(400);
    expect(long.res.headers.get("content-type")).toMatch(/json/);
    const bad = await postStream(dep.url, "lmp_mk_" + "B".repeat(43), { prompt: "Hi" });
    expect(bad.res.status).toBe(401);
  });
});

describe("GET {deployment_url}", () => {
  it("streams update events then end, under the spec's names and the example client's names", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const whole = DeploymentCompletionResponse.parse(
      (await complete(dep, team.modelKey, { prompt: "The old man", max_tokens: 30, temperature: 0, stop: [" river"] }))
        .json,
    ).result[0]!;
    const auth = { authorization: `Bearer ${team.modelKey}` };

    const spec = await fetch(
      `${dep.url}?${qs({ prompt: "The old man", max_tokens: 30, temperature: 0, stop: '[" river"]' })}`,
      { headers: auth },
    );
    expect(spec.status).toBe(200);
    expect(spec.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const events = parseSse(await spec.text());
    expect(events.at(-1)!.event).toBe("end");
    const updates = events.filter((e) => e.event === "update").map((e) => StreamUpdateEvent.parse(JSON.parse(e.data)));
    expect(updates.length).toBeGreaterThan(1);
    expect(updates.map((u) => u.completion).join("")).toBe(whole.completion);
    expect(StreamEndEvent.parse(JSON.parse(events.at(-1)!.data))).toMatchObject({
      finish_reason: whole.finish_reason,
      stop: whole.stop,
    });

    // The example client: text, length, stop_sequences (URI-encoded JSON), authorization in the query.
    const example = await eventSource(
      `${dep.url}?${qs({ text: "The old man", length: 30, temperature: 0, top_p: 1, top_k: 40, repetition_penalty: 1, stop_sequences: JSON.stringify([" river"]), authorization: `Bearer ${team.modelKey}` })}`,
    );
    expect(example.error).toBeUndefined();
    expect(example.updates.join("")).toBe(whole.completion);
    // The bare key is accepted in the query too.
    const bare = await eventSource(
      `${dep.url}?${qs({ text: "The old man", length: 30, temperature: 0, authorization: team.modelKey })}`,
    );
    expect(bare.updates.length).toBeGreaterThan(0);
  });

  it("reads the whole query after the first '?', and takes a stop string that starts with '['", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const greedy = { max_tokens: 12, temperature: 0 };
    const response = DeploymentCompletionResponse.parse(
      (await complete(dep, team.modelKey, { prompt: "Why?", ...greedy, stop: ["[INST]"] })).json,
    );
    const whole = response.result[0]!;
    // A raw "?" in the prompt, and the key after it: neither is cut off.
    const raw = `${dep.url}?prompt=Why?&max_tokens=12&temperature=0&stop=[INST]&authorization=${team.modelKey}`;
    const res = await fetch(raw);
    expect(res.status).toBe(200);
    const events = parseSse(await res.text());
    const updates = events.filter((e) => e.event === "update").map((e) => StreamUpdateEvent.parse(JSON.parse(e.data)));
    expect(updates.map((u) => u.completion).join("")).toBe(whole.completion);
    expect(StreamEndEvent.parse(JSON.parse(events.at(-1)!.data)).usage).toEqual(response.usage);
  });

  it("401 with the error body before any event for a missing or bad key", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    for (const query of [
      qs({ prompt: "Hi" }),
      qs({ prompt: "Hi", authorization: "Bearer nope" }),
      qs({ prompt: "Hi", authorization: team.apiKey }),
    ]) {
      const res = await fetch(`${dep.url}?${query}`);
      expect(res.status, query).toBe(401);
      expect(res.headers.get("content-type")).toMatch(/json/);
      expect(await res.json()).toEqual({ error: { type: "unauthorized", message: expect.any(String) } });
    }
    const es = await eventSource(`${dep.url}?${qs({ prompt: "Hi", authorization: "Bearer nope" })}`);
    expect(es.updates).toEqual([]);
    expect((es.error as { code?: number }).code).toBe(401);
  });

  it("400 naming the parameter as the client spelled it", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const cases: [Record<string, string>, string][] = [
      [{}, "prompt"],
      [{ text: "Hi", length: "abc" }, "length"],
      [{ prompt: "Hi", max_tokens: "0" }, "max_tokens"],
      [{ prompt: "Hi", temperature: "2" }, "temperature"],
      [{ prompt: "Hi", top_p: "x" }, "top_p"],
      [{ prompt: "Hi", top_k: "0" }, "top_k"],
      [{ prompt: "Hi", repetition_penalty: "0.5" }, "repetition_penalty"],
      [{ prompt: "Hi", stop_sequences: '["oops' }, "stop_sequences"],
      [{ prompt: "Hi", stop: '[""]' }, "stop[0]"],
      [{ prompt: "Hi", text: "Hi" }, "text"],
      [{ prompt: "Hi", n: "2" }, "n"],
    ];
    for (const [params, param] of cases) {
      const res = await fetch(`${dep.url}?${qs({ ...params, authorization: team.modelKey })}`);
      expect(res.status, JSON.stringify(params)).toBe(400);
      expect(((await res.json()) as any).error.param, JSON.stringify(params)).toBe(param);
    }
  });

  it("answers CORS preflights, and every answer allows any origin", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const pre = await fetch(dep.url, {
      method: "OPTIONS",
      headers: {
        origin: "http://example.test",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type",
      },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers.get("access-control-allow-origin")).toBe("*");
    expect(pre.headers.get("access-control-allow-methods")).toMatch(/POST/);
    expect(pre.headers.get("access-control-allow-headers")).toMatch(/authorization/);
    const denied = await fetch(`${dep.url}?prompt=Hi`, { headers: { origin: "http://example.test" } });
    expect(denied.status).toBe(401);
    expect(denied.headers.get("access-control-allow-origin")).toBe("*");
    const ok = await fetch(`${dep.url}?${qs({ prompt: "Hi", max_tokens: 2, authorization: team.modelKey })}`);
    expect(ok.headers.get("access-control-allow-origin")).toBe("*");
    await ok.text();
  });
});

describe("a client that disconnects", () => {
  // Greedy decoding of this prompt never meets EOS on the tiny model: 1,000 tokens take seconds.
  const long = { prompt: "The city was quiet", max_tokens: 1000, temperature: 0 };

  /**
   * A left generation is charged what it used (the key's tokens per minute, usage): before, it
   * counted 0 tokens, so a client could leave just before the end and use the model for free.
   */
  async function expectCharged(apiKey: string, least: number) {
    const rows = async () => UsageResponse.parse((await client(apiKey).get("/v1/usage?groupBy=deployment")).json).data;
    await expect.poll(async () => (await rows()).length, { timeout: 10_000 }).toBe(1);
    const [row] = await rows();
    expect(row!.requests).toBe(1);
    expect(row!.prompt_tokens).toBeGreaterThan(0);
    expect(row!.completion_tokens).toBeGreaterThanOrEqual(least);
  }

  async function expectIdleSoon() {
    const t = performance.now();
    await expect.poll(busySequences, { timeout: 1_500, interval: 50 }).toBe(0);
    return performance.now() - t;
  }

  it("stops its POST stream's generation", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    await expect.poll(busySequences, { timeout: 10_000 }).toBe(0);
    const controller = new AbortController();
    const res = await fetch(dep.url, {
      method: "POST",
      headers: { authorization: `Bearer ${team.modelKey}`, "content-type": "application/json" },
      body: JSON.stringify({ ...long, logit_bias: await noEosBias(), stream: true }),
      signal: controller.signal,
    });
    const reader = res.body!.getReader();
    for (let i = 0; i < 3; i++) await reader.read();
    expect(await busySequences()).toBe(1);
    controller.abort();
    await expectIdleSoon();
    await expectCharged(team.apiKey, 2);
  });

  it("stops its GET stream's generation", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    await expect.poll(busySequences, { timeout: 10_000 }).toBe(0);
    const es = new EventSource(`${dep.url}?${qs({ ...long, authorization: team.modelKey })}`);
    let updates = 0;
    await new Promise<void>((resolve) => es.addEventListener("update", () => ++updates === 3 && resolve()));
    expect(await busySequences()).toBe(1);
    es.close();
    await expectIdleSoon();
  });

  it("stops a non-streamed generation too", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    await expect.poll(busySequences, { timeout: 10_000 }).toBe(0);
    const controller = new AbortController();
    const pending = fetch(dep.url, {
      method: "POST",
      headers: { authorization: `Bearer ${team.modelKey}`, "content-type": "application/json" },
      body: JSON.stringify(long),
      signal: controller.signal,
    }).catch((e: unknown) => e);
    await expect.poll(busySequences, { timeout: 5_000, interval: 20 }).toBe(1);
    controller.abort();
    expect(await pending).toMatchObject({ name: "AbortError" });
    await expectIdleSoon();
    await expectCharged(team.apiKey, 0);
  });
});

describe("a key revoked while its generation runs", () => {
  // As above: 1,000 tokens without EOS take seconds, so the revoke comes mid-generation.
  const long = { prompt: "The city was quiet", max_tokens: 1000, temperature: 0 };
  const revoke = (team: { id: string }, id: string) => revokeApiKey(db().db, { id, teamId: team.id }); // another process

  /** A streamed answer: its first `n` reads, then (after `between`) the rest, as SSE events. */
  async function readAround(res: Response, n: number, between: () => Promise<unknown>) {
    if (res.status !== 200) throw new Error(`${res.status}: ${await res.text()}`);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    for (let i = 0; i < n; i++) text += decoder.decode((await reader.read()).value, { stream: true });
    await between();
    const t = performance.now();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    return { events: parseSse(text), endedMs: performance.now() - t };
  }

  it("ends a POST stream with the 401 as an error event, stops the generation and charges what it used", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    await expect.poll(busySequences, { timeout: 10_000 }).toBe(0);
    const res = await fetch(dep.url, {
      method: "POST",
      headers: { authorization: `Bearer ${team.modelKey}`, "content-type": "application/json" },
      body: JSON.stringify({ ...long, logit_bias: await noEosBias(), stream: true }),
    });
    const { events, endedMs } = await readAround(res, 3, () => revoke(team, team.modelKeyId));
    expect(endedMs).toBeLessThan(2_000); // the whole generation takes longer
    expect(JSON.parse(events.at(-1)!.data)).toEqual({
      error: { type: "unauthorized", message: "This model key has been revoked." },
    });
    const deltas = events.slice(0, -1).map((e) => DeploymentStreamChunk.parse(JSON.parse(e.data)));
    expect(deltas.length).toBeGreaterThan(2);
    expect(deltas.every((c) => "completion" in c && !("finish_reason" in c))).toBe(true); // it did not finish
    await expect.poll(busySequences, { timeout: 1_500, interval: 50 }).toBe(0);
    // Charged what it used, as a client that leaves is.
    const usage = async () =>
      UsageResponse.parse((await client(team.apiKey).get("/v1/usage?groupBy=deployment")).json).data;
    await expect.poll(async () => (await usage()).length, { timeout: 10_000 }).toBe(1);
    expect((await usage())[0]!.completion_tokens).toBeGreaterThanOrEqual(deltas.length);
  });

  it("ends a GET stream with an error event, then the end", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const res = await fetch(`${dep.url}?${qs({ ...long, authorization: team.modelKey })}`);
    const { events } = await readAround(res, 1, () => revoke(team, team.modelKeyId));
    expect(events.slice(-2).map((e) => e.event)).toEqual(["error", "end"]);
    expect(JSON.parse(events.at(-2)!.data).error).toEqual({
      type: "unauthorized",
      message: "This model key has been revoked.",
    });
    expect(JSON.parse(events.at(-1)!.data)).toMatchObject({ finish_reason: "error" });
  });

  it("answers a non-streamed generation with the 401", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    await expect.poll(busySequences, { timeout: 10_000 }).toBe(0);
    const pending = complete(dep, team.modelKey, { ...long, logit_bias: await noEosBias() });
    await expect.poll(busySequences, { timeout: 5_000, interval: 20 }).toBe(1);
    await revoke(team, team.modelKeyId);
    const res = await pending;
    expect(res.status).toBe(401);
    expect(res.json.error).toEqual({ type: "unauthorized", message: "This model key has been revoked." });
    await expect.poll(busySequences, { timeout: 1_500, interval: 50 }).toBe(0);
  });

  it("ends a hosted chat stream when its API key is revoked; the team's other key streams on", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const open = (key: string, maxTokens: number) =>
      fetch(`${baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: dep.name,
          messages: [{ role: "user", content: "Tell me a story" }],
          max_tokens: maxTokens,
          temperature: 0,
          stream: true,
        }),
      });
    const other = await createApiKey(db().db, { teamId: team.id, kind: "api", name: "other" });
    const [revoked, kept] = await Promise.all([open(team.apiKey, 900), open(other.secret, 300)]);
    const { events } = await readAround(revoked, 1, () => revoke(team, team.keyId));
    expect(events.at(-1)!.event).toBe("error");
    expect(JSON.parse(events.at(-1)!.data).error).toEqual({
      type: "unauthorized",
      message: "This API key has been revoked.",
    });
    const keptEvents = parseSse(await kept.text());
    expect(keptEvents.at(-1)!.data).toBe("[DONE]");
    const last = ChatCompletionChunk.parse(JSON.parse(keptEvents.at(-2)!.data));
    expect(last.usage?.completion_tokens).toBe(300);
  });
});
