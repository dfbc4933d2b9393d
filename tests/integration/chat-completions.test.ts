// POST /v1/chat/completions: the spec's completion result plus what the official OpenAI client
// needs, checked with that client itself; chat template, model names, aliases, streaming, errors.
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { ChatCompletionChunk, ChatCompletionResponse } from "@/lib/contracts/chat-completions";
import { DeploymentCompletionResponse } from "@/lib/contracts/deployments";
import { baseUrl, client, makeTeam } from "../helpers/context";
import { complete, makeDeployment, makeTeamWithDeployment, parseSse } from "../helpers/deployments";

const openai = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${baseUrl}/v1`, maxRetries: 0 });

describe("POST /v1/chat/completions", () => {
  it("answers messages in the spec's shape plus the OpenAI fields (schema-checked)", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const res = await client(team.apiKey).post("/v1/chat/completions", {
      model: `${team.slug}/${dep.name}`,
      messages: [{ role: "user", content: "Tell me about the river" }],
      max_tokens: 12,
      temperature: 0,
      stream: false,
    });
    expect(res.status, res.text).toBe(200);
    const body = ChatCompletionResponse.parse(res.json);
    expect(body.model).toBe(`${team.slug}/${dep.name}`);
    expect(body.choices[0]!.message.role).toBe("assistant");
    expect(body.message.content).toBe(body.choices[0]!.message.content);
    expect(body.usage.input_tokens).toBe(body.usage.prompt_tokens);
    expect(body.usage.output_tokens).toBeGreaterThan(0);
    expect(body.usage.total_tokens).toBe(body.usage.input_tokens + body.usage.output_tokens);
  });

  it("formats messages with the model's chat template", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const messages = [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Where is the bridge?" },
    ];
    const chat = ChatCompletionResponse.parse(
      (
        await client(team.apiKey).post("/v1/chat/completions", {
          model: dep.name,
          messages,
          max_tokens: 16,
          temperature: 0,
        })
      ).json,
    );
    // The tiny model's template: "<|role|>\ncontent\n" per message, then "<|assistant|>\n".
    const rendered = "<|system|>\nBe brief.\n<|user|>\nWhere is the bridge?\n<|assistant|>\n";
    const raw = DeploymentCompletionResponse.parse(
      (await complete(dep, team.modelKey, { prompt: rendered, max_tokens: 16, temperature: 0 })).json,
    );
    expect(chat.choices[0]!.message.content).toBe(raw.result[0]!.completion);
    expect(chat.usage.prompt_tokens).toBe(raw.usage.prompt_tokens);
  });

  it("takes a plain prompt instead of messages, temperature under the spec's spelling, and stop", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const api = client(team.apiKey);
    const base = { model: dep.name, prompt: "Once upon a time", max_tokens: 20, seed: 4 };
    const raw = (await complete(dep, team.modelKey, { prompt: base.prompt, max_tokens: 20, seed: 4, temperature: 0.3 }))
      .json;
    const spelled = ChatCompletionResponse.parse(
      (await api.post("/v1/chat/completions", { ...base, temeperature: 0.3 })).json,
    );
    expect(spelled.message.content).toBe(raw.result[0].completion);
    const usual = ChatCompletionResponse.parse(
      (await api.post("/v1/chat/completions", { ...base, temperature: 0.3 })).json,
    );
    expect(usual.message.content).toBe(raw.result[0].completion);

    const stop = raw.result[0].completion.slice(6, 9);
    const stopped = ChatCompletionResponse.parse(
      (await api.post("/v1/chat/completions", { ...base, temperature: 0.3, stop: [stop] })).json,
    );
    expect(stopped.choices[0]!.finish_reason).toBe("stop");
    expect(stopped.message.content).toBe(raw.result[0].completion.slice(0, raw.result[0].completion.indexOf(stop)));
  });

  it("404 naming model for an unknown deployment or another team's", async () => {
    const { team } = await makeTeamWithDeployment();
    const other = await makeTeamWithDeployment();
    const api = client(team.apiKey);
    for (const model of ["nope", `${team.slug}/nope`, `${other.team.slug}/${other.dep.name}`, other.dep.name]) {
      const res = await api.post("/v1/chat/completions", { model, prompt: "Hi" });
      expect(res.status, model).toBe(404);
      expect(res.json, model).toEqual({ error: { type: "not_found", message: expect.any(String), param: "model" } });
    }
  });

  it("validates the body with 400 naming the parameter; needs an API key", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const api = client(team.apiKey);
    const ok = { model: dep.name, prompt: "Hi" };
    const cases: [Record<string, unknown>, string][] = [
      [{ model: undefined }, "model"],
      [{ prompt: undefined }, "messages"],
      [{ messages: [{ role: "user", content: "x" }] }, "prompt"],
      [{ prompt: undefined, messages: [] }, "messages"],
      [{ prompt: undefined, messages: [{ role: "robot", content: "x" }] }, "messages[0].role"],
      [{ max_tokens: 0 }, "max_tokens"],
      [{ temperature: 3 }, "temperature"],
      [{ temeperature: -1 }, "temeperature"],
      [{ temperature: 0.5, temeperature: 0.5 }, "temeperature"],
      [{ stop: [""] }, "stop[0]"],
      [{ stream: "no" }, "stream"],
      [{ frequency_penalty: 1 }, "frequency_penalty"],
      [{ max_tokens: 4, max_completion_tokens: 5 }, "max_completion_tokens"],
      [
        { prompt: undefined, messages: [{ role: "user", content: [{ type: "image_url", image_url: {} }] }] },
        "messages[0].content",
      ],
      [{ prompt: undefined, messages: [{ role: "user", content: "x", name: "bob" }] }, "messages[0].name"],
    ];
    for (const [patch, param] of cases) {
      const res = await api.post("/v1/chat/completions", { ...ok, ...patch });
      expect(res.status, JSON.stringify(patch)).toBe(400);
      expect(res.json.error.param, JSON.stringify(patch)).toBe(param);
    }
    expect((await client(team.modelKey).post("/v1/chat/completions", ok)).status).toBe(401);
    const ctx = await api.post("/v1/chat/completions", { ...ok, max_tokens: 2048 });
    expect(ctx.status).toBe(400);
    expect(ctx.json.error.type).toBe("context_length_exceeded");
  });

  it("takes what OpenAI clients send: text parts, the developer role, max_completion_tokens, user, neutral penalties", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const api = client(team.apiKey);
    const plain = await api.post("/v1/chat/completions", {
      model: dep.name,
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "Hello\nthere" },
      ],
      max_tokens: 6,
      temperature: 0,
    });
    expect(plain.status, plain.text).toBe(200);
    // Before: 400 for each of these fields (LangChain sends the penalties, newer clients the rest).
    const asClientsSend = await api.post("/v1/chat/completions", {
      model: dep.name,
      messages: [
        { role: "developer", content: [{ type: "text", text: "Be brief." }] },
        {
          role: "user",
          content: [
            { type: "text", text: "Hello" },
            { type: "text", text: "there" },
          ],
        },
      ],
      max_completion_tokens: 6,
      user: "end-user-42",
      presence_penalty: 0,
      frequency_penalty: 0,
      temperature: 0,
    });
    expect(asClientsSend.status, asClientsSend.text).toBe(200);
    expect(asClientsSend.json.choices[0].message.content).toBe(plain.json.choices[0].message.content);
    expect(asClientsSend.json.usage).toEqual(plain.json.usage);
  });

  it("works unchanged with the official OpenAI client, streamed or not", async () => {
    const team = await makeTeam();
    const dep = await makeDeployment(team);
    const ai = openai(team.apiKey);
    const messages = [{ role: "user" as const, content: "Say something" }];
    const done = await ai.chat.completions.create({ model: dep.name, messages, max_tokens: 16, temperature: 0 });
    expect(done.object).toBe("chat.completion");
    expect(done.choices[0]!.message.content!.length).toBeGreaterThan(0);
    expect(["stop", "length"]).toContain(done.choices[0]!.finish_reason);
    expect(done.usage!.completion_tokens).toBeGreaterThan(0);

    const stream = await ai.chat.completions.create({
      model: `${team.slug}/${dep.name}`,
      messages,
      max_tokens: 16,
      temperature: 0,
      stream: true,
    });
    let text = "";
    let last: OpenAI.Chat.Completions.ChatCompletionChunk | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      last = chunk;
    }
    expect(text).toBe(done.choices[0]!.message.content);
    expect(last!.usage!.completion_tokens).toBe(done.usage!.completion_tokens);
    expect(last!.choices[0]!.finish_reason).toBe(done.choices[0]!.finish_reason);

    await expect(ai.chat.completions.create({ model: "missing", messages })).rejects.toMatchObject({ status: 404 });
  });

  it("streams data-only chunks with the delta content, usage last, then [DONE]", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const res = await fetch(`${baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${team.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: dep.name, prompt: "The dog", max_tokens: 10, seed: 3, n: 2, stream: true }),
    });
    expect(res.status).toBe(200);
    const raw = await res.text();
    // No `event:` line: openai-node 4-5 and openai-python 1.x read a named event as another kind.
    expect(raw).not.toMatch(/^event:/m);
    const events = parseSse(raw);
    expect(events.at(-1)).toEqual({ event: "message", data: "[DONE]" });
    const chunks = events.slice(0, -1).map((e) => {
      expect(e.event).toBe("message");
      return ChatCompletionChunk.parse(JSON.parse(e.data));
    });
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks.slice(0, -1).every((c) => c.usage === undefined)).toBe(true);
    expect(chunks.at(-1)!.usage!.completion_tokens).toBeGreaterThan(0);
    expect(chunks.at(-1)!.choices[0]!.finish_reason).not.toBeNull();
    const whole = ChatCompletionResponse.parse(
      (
        await client(team.apiKey).post("/v1/chat/completions", {
          model: dep.name,
          prompt: "The dog",
          max_tokens: 10,
          seed: 3,
          n: 2,
        })
      ).json,
    );
    for (const choice of whole.choices) {
      const text = chunks
        .flatMap((c) => c.choices)
        .filter((c) => c.index === choice.index)
        .map((c) => c.delta.content ?? "")
        .join("");
      expect(text).toBe(choice.message.content);
    }
  });

  it("opens a choice that ends before any text with its role (the openai client's stream helper needs it)", async () => {
    const team = await makeTeam();
    const dep = await makeDeployment(team);
    const ai = openai(team.apiKey);
    const messages = [{ role: "user" as const, content: "Say something" }];
    const first = await ai.chat.completions.create({ model: dep.name, messages, max_tokens: 1, temperature: 0 });
    const text = first.choices[0]!.message.content!;
    expect(text.length).toBeGreaterThan(0);
    // Stopped at its first character: the choice ends without text.
    const request = { model: dep.name, messages, max_tokens: 8, temperature: 0, stop: [text[0]!] };
    const final = await ai.chat.completions.stream(request).finalChatCompletion();
    // Before: `missing role for choice 0` thrown by the client.
    expect(final.choices[0]!.message).toMatchObject({ role: "assistant", content: "" });
    expect(final.choices[0]!.finish_reason).toBe("stop");
  });
});
