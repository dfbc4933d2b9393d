// Chat requests: `messages` are rendered with the model's chat template (or a plain transcript
// when the model has none) before tokenization; a request gives exactly one of prompt/messages.
import { cp, mkdtemp, readFile, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { FALLBACK_CHAT_TEMPLATE, renderChat } from "./chat-template";
import { loadModel, type LoadedModel } from "./model/load-model";
import { planRequest } from "./request-plan";
import { llamaModelDir, tinyModelDir } from "./testing/models";

let m: LoadedModel;
beforeAll(async () => {
  m = await loadModel(await tinyModelDir());
});

const messages = [
  { role: "system" as const, content: "Be brief." },
  { role: "user" as const, content: "Hi" },
];

/** A private copy of the tiny model whose chat template files are set up by `prepare`. */
async function withTemplates(prepare: (dir: string, config: Record<string, unknown>) => Promise<void>) {
  const dir = await mkdtemp(path.join(os.tmpdir(), "lmp-chat-"));
  await cp(await tinyModelDir(), dir, { recursive: true });
  const config = JSON.parse(await readFile(path.join(dir, "tokenizer_config.json"), "utf8"));
  await prepare(dir, config);
  await writeFile(path.join(dir, "tokenizer_config.json"), JSON.stringify(config));
  return loadModel(dir);
}

const rendered = (loaded: LoadedModel) => ({
  text: renderChat(loaded.tokenizer, messages),
  source: loaded.info.chatTemplate,
});

describe("chat prompts", () => {
  it("renders messages with the model's template and opens the assistant turn", () => {
    const plan = planRequest(m, { messages, max_tokens: 4 });
    expect(plan.promptText).toBe("<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\n");
    expect(plan.promptIds).toEqual(m.tokenizer.encode(plan.promptText, { add_special_tokens: false }));
    expect(m.info.chatTemplate).toBe("tokenizer_config.json");
  });

  it("chat_template.jinja wins over tokenizer_config.json, which wins over chat_template.json", async () => {
    const jinja = await withTemplates(async (dir) => {
      await writeFile(
        path.join(dir, "chat_template.jinja"),
        "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}",
      );
      await writeFile(
        path.join(dir, "chat_template.json"),
        JSON.stringify({ chat_template: "json{{ messages[0].content }}" }),
      );
    });
    expect(rendered(jinja)).toEqual({ text: "[system]Be brief.[user]Hi", source: "chat_template.jinja" });
    const json = await withTemplates(async (dir, config) => {
      delete config.chat_template;
      await writeFile(
        path.join(dir, "chat_template.json"),
        JSON.stringify({ chat_template: "json:{{ messages[1].content }}" }),
      );
    });
    expect(rendered(json)).toEqual({ text: "json:Hi", source: "chat_template.json" });
    await Promise.all([jinja.dispose(), json.dispose()]);
  });

  it("a model without any template gets the documented 'role: content' fallback", async () => {
    const none = await withTemplates(async (_dir, config) => {
      delete config.chat_template;
    });
    expect(rendered(none)).toEqual({ text: "system: Be brief.\nuser: Hi\nassistant:", source: "fallback" });
    expect(none.tokenizer.chat_template).toBe(FALLBACK_CHAT_TEMPLATE);
    await none.dispose();
  });

  it("the fallback template gets the tokenizer's BOS, as a prompt does (a model's own template writes its own)", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "lmp-chat-llama-"));
    await cp(await llamaModelDir(), dir, { recursive: true });
    const config = JSON.parse(await readFile(path.join(dir, "tokenizer_config.json"), "utf8"));
    const withTemplate = await loadModel(dir);
    delete config.chat_template;
    await writeFile(path.join(dir, "tokenizer_config.json"), JSON.stringify(config));
    const fallback = await loadModel(dir);
    try {
      const bos = fallback.tokenizer.bos_token_id as number;
      const plan = planRequest(fallback, { messages, max_tokens: 4 });
      expect(plan.promptIds[0]).toBe(bos);
      expect(plan.promptIds).toEqual(fallback.tokenizer.encode(plan.promptText));
      // The model's own template (which writes "<s>" itself): nothing added on top.
      const own = planRequest(withTemplate, { messages, max_tokens: 4 });
      expect(own.promptIds).toEqual(withTemplate.tokenizer.encode(own.promptText, { add_special_tokens: false }));
      expect(own.promptIds.filter((id) => id === bos).length).toBeLessThanOrEqual(1);
    } finally {
      await Promise.all([withTemplate.dispose(), fallback.dispose()]);
    }
  });

  it("a template that raises is an invalid request with the template's message", async () => {
    const strict = await withTemplates(async (_dir, config) => {
      config.chat_template =
        "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}";
    });
    expect(() => planRequest(strict, { messages, max_tokens: 4 })).toThrow(
      expect.objectContaining({
        code: "invalid_request",
        param: "messages",
        message: expect.stringContaining("System role not supported"),
      }),
    );
    await strict.dispose();
  });

  it("a template the engine cannot render is said at load, and its chat requests are the server's failure", async () => {
    const broken = await withTemplates(async (_dir, config) => {
      config.chat_template = "{% for m in messages %}{{ m.content | frobnicate }}{% endfor %}";
    });
    try {
      expect(broken.info.chatTemplateError).toMatch(/frobnicate/);
      expect(broken.info.servingNotes.join(" ")).toMatch(
        /^.*Chat requests \(messages\) fail: .*frobnicate.*prompts work\./,
      );
      expect(() => planRequest(broken, { messages, max_tokens: 4 })).toThrow(
        expect.objectContaining({
          code: "internal",
          param: "messages",
          message: expect.stringContaining("send a prompt"),
        }),
      );
      expect(planRequest(broken, { prompt: "Hi", max_tokens: 4 }).promptIds.length).toBeGreaterThan(0);
    } finally {
      await broken.dispose();
    }
    // A template that insists on a system message renders at load (with one), so what it refuses
    // stays the client's 400.
    const strict = await withTemplates(async (_dir, config) => {
      config.chat_template =
        "{% if messages[0]['role'] != 'system' %}{{ raise_exception('A system message comes first') }}{% endif %}" +
        "{% for m in messages %}{{ m.content }}{% endfor %}";
    });
    try {
      expect(strict.info.chatTemplateError).toBeUndefined();
      expect(() => planRequest(strict, { messages: [{ role: "user", content: "Hi" }], max_tokens: 4 })).toThrow(
        expect.objectContaining({ code: "invalid_request", param: "messages" }),
      );
    } finally {
      await strict.dispose();
    }
  });

  it("takes exactly one of prompt and messages", () => {
    expect(() => planRequest(m, { prompt: "Hi", messages })).toThrow(/exactly one of prompt and messages/);
    expect(() => planRequest(m, { max_tokens: 4 })).toThrow(/exactly one of prompt and messages/);
    expect(() => planRequest(m, { messages: [{ role: "robot", content: "x" }] })).toThrow();
  });
});
