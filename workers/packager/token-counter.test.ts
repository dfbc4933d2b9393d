import { cp, mkdtemp, readFile, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadModel } from "../engine/model/load-model";
import { planRequest } from "../engine/request-plan";
import { llamaModelDir } from "../engine/testing/models";
import { loadTokenCounter, TemplateRefusal } from "./token-counter";

describe("dataset token counts", () => {
  it("count a conversation as the engine encodes it, with or without the model's own chat template", async () => {
    const messages = [{ role: "user" as const, content: "Where is the bridge?" }];
    const noTemplate = await mkdtemp(path.join(os.tmpdir(), "lmp-count-"));
    await cp(await llamaModelDir(), noTemplate, { recursive: true });
    const config = JSON.parse(await readFile(path.join(noTemplate, "tokenizer_config.json"), "utf8"));
    delete config.chat_template;
    await writeFile(path.join(noTemplate, "tokenizer_config.json"), JSON.stringify(config));
    for (const dir of [await llamaModelDir(), noTemplate]) {
      const count = await loadTokenCounter(dir);
      const model = await loadModel(dir);
      try {
        // The engine's prompt for the same turn opens the assistant's turn: the counter renders
        // without that, so compare the user turn alone through the same encoding.
        const plan = planRequest(model, { messages, max_tokens: 1 });
        const fallback = model.info.chatTemplate === "fallback";
        expect(plan.promptIds[0] === model.tokenizer.bos_token_id).toBe(true);
        const counted = count(messages);
        const rendered = model.tokenizer.apply_chat_template(messages, {
          tokenize: false,
          add_generation_prompt: false,
        }) as string;
        expect(counted).toBe(model.tokenizer.encode(rendered, { add_special_tokens: fallback }).length);
        if (fallback) expect(counted).toBe(model.tokenizer.encode(rendered, { add_special_tokens: false }).length + 1);
      } finally {
        await model.dispose();
      }
    }
  });

  it("refuse a chat template that cannot render a plain conversation at load, not sample by sample", async () => {
    const broken = await mkdtemp(path.join(os.tmpdir(), "lmp-count-"));
    await cp(await llamaModelDir(), broken, { recursive: true });
    const config = JSON.parse(await readFile(path.join(broken, "tokenizer_config.json"), "utf8"));
    config.chat_template = "{% for m in messages %}{{ m.content | no_such_filter }}{% endfor %}";
    await writeFile(path.join(broken, "tokenizer_config.json"), JSON.stringify(config));
    // Before: loaded, then every sample refused, and the dataset READY with none of them.
    await expect(loadTokenCounter(broken)).rejects.toBeInstanceOf(TemplateRefusal);
  });

  it("render the tools a conversation was offered, as a template that takes them writes them", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "lmp-count-"));
    await cp(await llamaModelDir(), dir, { recursive: true });
    const config = JSON.parse(await readFile(path.join(dir, "tokenizer_config.json"), "utf8"));
    config.chat_template =
      "{% if tools %}Tools: {{ tools | tojson }}\n{% endif %}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}";
    await writeFile(path.join(dir, "tokenizer_config.json"), JSON.stringify(config));
    const count = await loadTokenCounter(dir);
    const messages = [
      { role: "user", content: "Weather?" },
      { role: "assistant", content: "Sunny." },
    ];
    const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object" } } }];
    // Before: the tools were never rendered, and a tool-calling sample counted short.
    expect(count(messages, tools)).toBeGreaterThan(count(messages) + 5);
  });
});
